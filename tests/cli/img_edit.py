#!/usr/bin/env python3
"""img_edit.py: fixture edits for the predict tests, standard library only.
  img_edit.py no-orientation IN.jpg OUT.jpg   EXIF orientation set to 1
                                              (the stored pixels as they are)
  img_edit.py over-white IN.png OUT.png       an 8-bit RGBA PNG composited
                                              over white, as RGB"""
import struct
import sys
import zlib


def no_orientation(src, dst):
    d = bytearray(open(src, "rb").read())
    i = d.find(b"Exif\0\0")
    assert i > 0, "no EXIF block"
    t = i + 6  # the TIFF header
    le = d[t:t + 2] == b"II"
    u16 = lambda o: struct.unpack_from("<H" if le else ">H", d, o)[0]
    u32 = lambda o: struct.unpack_from("<I" if le else ">I", d, o)[0]
    ifd = t + u32(t + 4)
    for e in range(u16(ifd)):
        o = ifd + 2 + 12 * e
        if u16(o) == 0x0112:
            struct.pack_into("<H" if le else ">H", d, o + 8, 1)
            open(dst, "wb").write(d)
            return
    sys.exit("no orientation tag in " + src)


def chunks(d):
    o = 8
    while o < len(d):
        n, kind = struct.unpack_from(">I4s", d, o)
        yield kind, d[o + 8:o + 8 + n]
        o += 12 + n


def unfilter(raw, w, h, bpp):
    stride, out, prev = w * bpp, bytearray(), bytearray(w * bpp)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out += line
        prev = line
    return out


def png_chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def over_white(src, dst):
    d = open(src, "rb").read()
    idat = b""
    for kind, body in chunks(d):
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert (depth, ctype, interlace) == (8, 6, 0), "not 8-bit RGBA, not interlaced"
        elif kind == b"IDAT":
            idat += body
    px = unfilter(zlib.decompress(idat), w, h, 4)
    rows = bytearray()
    for y in range(h):
        rows.append(0)
        for x in range(w):
            r, g, b, a = px[(y * w + x) * 4:(y * w + x) * 4 + 4]
            rows += bytes((v * a + 255 * (255 - a) + 127) // 255 for v in (r, g, b))
    out = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
    out += png_chunk(b"IDAT", zlib.compress(bytes(rows))) + png_chunk(b"IEND", b"")
    open(dst, "wb").write(out)


{"no-orientation": no_orientation, "over-white": over_white}[sys.argv[1]](sys.argv[2], sys.argv[3])

#!/usr/bin/env python3
"""png_info.py - what a screenshot shows, with the standard library only.

    png_info.py SHOT.png                  # prints: width height colours inked
    png_info.py SHOT.png --crop Y0 Y1 OUT.png

Decodes 8-bit RGB/RGBA non-interlaced PNGs (what Chromium writes): width,
height, the number of distinct colours and the fraction of pixels that are
not near-white ("inked"). --crop writes rows [Y0, Y1) to OUT.png, for
looking at part of a tall screenshot. Exits 1 on anything it cannot read.
"""
import struct
import sys
import zlib


def read_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, hdr = 8, [], None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + n
    if not hdr:
        raise ValueError("no IHDR")
    w, h, depth, ctype, _, _, interlace = hdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        raise ValueError("unsupported PNG (depth %d, colour type %d)" % (depth, ctype))
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def write_png(path, w, rows, bpp):
    raw = b"".join(b"\x00" + r for r in rows)
    ctype = 2 if bpp == 3 else 6

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", w, len(rows), 8, ctype, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw, 6)))
        f.write(chunk(b"IEND", b""))


def main():
    w, h, bpp, rows = read_png(sys.argv[1])
    if len(sys.argv) == 6 and sys.argv[2] == "--crop":
        y0, y1 = int(sys.argv[3]), int(sys.argv[4])
        write_png(sys.argv[5], w, rows[y0:y1], bpp)
        return
    colours, inked = set(), 0
    for r in rows[::2]:
        for i in range(0, len(r), bpp * 2):
            px = r[i:i + 3]
            colours.add(px)
            if min(px) < 235:
                inked += 1
    sampled = ((h + 1) // 2) * ((w + 1) // 2)
    print(w, h, len(colours), "%.4f" % (inked / sampled))


if __name__ == "__main__":
    try:
        main()
    except (OSError, ValueError, zlib.error, struct.error) as e:
        print("png_info: %s" % e, file=sys.stderr)
        sys.exit(1)

#!/usr/bin/env python3
"""st_tool.py: what the training tests do to checkpoints (safetensors files).
Standard library only.

  st_tool.py same A B      exit 0 when A and B hold the same tensors, byte
                           for byte (optimiser state included), and the same
                           metadata but for "run" (the run's history: wall
                           times), "run_id" (two runs started apart are two
                           runs) and "checksum" (which covers both);
                           otherwise print the first difference, exit 1
  st_tool.py get FILE KEY  print metadata value KEY ("None" when absent)
  st_tool.py set FILE KEY=VALUE... [--keep-checksum]
                           set metadata entries and write the checksum of
                           the new content (as nn_checkpoint_save does), so
                           the file is refused for what it says, not for
                           its checksum; --keep-checksum leaves the old one
  st_tool.py flip FILE TENSOR OFFSET [--resign]
                           xor 0x80 into byte OFFSET of TENSOR's data (the
                           checksum left as it was: a damaged file; with
                           --resign one that matches: a file written so)
  st_tool.py poke FILE TENSOR INDEX VALUE
                           element INDEX of F32 TENSOR set to VALUE, the
                           checksum rewritten (a file written so)
  st_tool.py crc FILE      print the file's size in bytes and the CRC-32C of
                           all its bytes (8 hex digits), as --init's record
                           of the file it started from has them
  st_tool.py strip FILE    remove the checksum (a file another program
                           wrote, e.g. safetensors.torch.save_file)
  st_tool.py drop FILE TENSOR...
                           remove tensors, the checksum rewritten
  st_tool.py overflow FWD GRAD
                           FWD: a run whose step was skipped for a forward
                           overflow (batch-norm statistics put back);
                           GRAD: the same run whose step was skipped for a
                           gradient overflow instead. Prints "counter stat
                           weight" when FWD's weights equal GRAD's, its
                           running statistics are finite and differ, and
                           its counters are one batch behind; otherwise
                           names what did not hold. Exit 0.
"""
import array
import json
import math
import struct
import sys

_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _TABLE.append(_c)


def crc32c(crc, data):
    crc ^= 0xFFFFFFFF
    t = _TABLE
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def load(path):
    with open(path, "rb") as f:
        data = bytearray(f.read())
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {}) or {}
    return data, 8 + n, header, meta


def tensor_bytes(data, base, t):
    b, e = t["data_offsets"]
    return bytes(data[base + b:base + e])


def checksum(data, base, header, meta):
    """train/safetensors.h's st_checksum, skipping "checksum"."""
    crc = 0
    u64 = lambda v: struct.pack("<Q", v)
    for name in sorted(header, key=lambda s: s.encode()):
        t = header[name]
        raw = tensor_bytes(data, base, t)
        crc = crc32c(crc, b"T" + name.encode() + b"\0" + t["dtype"].encode() + b"\0")
        crc = crc32c(crc, u64(len(t["shape"])) + b"".join(u64(d) for d in t["shape"]))
        crc = crc32c(crc, u64(len(raw)) + raw)
    for k in sorted((k for k in meta if k != "checksum"), key=lambda s: s.encode()):
        crc = crc32c(crc, b"M" + k.encode() + b"\0" + meta[k].encode() + b"\0")
    return crc


def write(path, data, base, header, meta):
    h = dict(header)
    h["__metadata__"] = meta
    hb = json.dumps(h, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb + bytes(data[base:]))


def main(argv):
    cmd = argv[0] if argv else ""
    if cmd == "same" and len(argv) == 3:
        da, ba, ha, ma = load(argv[1])
        db, bb, hb, mb = load(argv[2])
        if sorted(ha) != sorted(hb):
            print("different tensor names:", sorted(set(ha) ^ set(hb)))
            return 1
        for k in sorted(ha):
            if (ha[k]["dtype"], ha[k]["shape"]) != (hb[k]["dtype"], hb[k]["shape"]):
                print("tensor %s: another dtype or shape" % k)
                return 1
            if tensor_bytes(da, ba, ha[k]) != tensor_bytes(db, bb, hb[k]):
                print("tensor %s differs" % k)
                return 1
        skip = ("run", "run_id", "checksum")
        for k in sorted(set(ma) | set(mb)):
            if k not in skip and ma.get(k) != mb.get(k):
                print("metadata %s: %r vs %r" % (k, ma.get(k), mb.get(k)))
                return 1
        print("same: %d tensors, %d metadata entries" % (len(ha), len(ma)))
        return 0
    if cmd == "get" and len(argv) == 3:
        print(load(argv[1])[3].get(argv[2]))
        return 0
    if cmd == "set" and len(argv) >= 3:
        keep = "--keep-checksum" in argv
        data, base, header, meta = load(argv[1])
        for kv in argv[2:]:
            if kv != "--keep-checksum":
                k, v = kv.split("=", 1)
                meta[k] = v
        if not keep:
            meta["checksum"] = "crc32c:%08x" % checksum(data, base, header, meta)
        write(argv[1], data, base, header, meta)
        return 0
    if cmd == "flip" and len(argv) in (4, 5):
        data, base, header, meta = load(argv[1])
        b, e = header[argv[2]]["data_offsets"]
        at = base + b + int(argv[3])
        assert at < base + e, "offset outside the tensor"
        data[at] ^= 0x80
        if argv[4:] == ["--resign"]:
            meta["checksum"] = "crc32c:%08x" % checksum(data, base, header, meta)
            write(argv[1], data, base, header, meta)
        else:
            with open(argv[1], "wb") as f:
                f.write(bytes(data))
        return 0
    if cmd == "poke" and len(argv) == 5:
        data, base, header, meta = load(argv[1])
        t = header[argv[2]]
        assert t["dtype"] == "F32"
        b, e = t["data_offsets"]
        at = base + b + 4 * int(argv[3])
        assert at + 4 <= base + e, "index outside the tensor"
        struct.pack_into("<f", data, at, float(argv[4]))
        meta["checksum"] = "crc32c:%08x" % checksum(data, base, header, meta)
        write(argv[1], data, base, header, meta)
        return 0
    if cmd == "crc" and len(argv) == 2:
        with open(argv[1], "rb") as f:
            data = f.read()
        print(len(data), "%08x" % crc32c(0, data))
        return 0
    if cmd == "strip" and len(argv) == 2:
        data, base, header, meta = load(argv[1])
        meta.pop("checksum", None)
        write(argv[1], data, base, header, meta)
        return 0
    if cmd == "drop" and len(argv) >= 3:
        data, base, header, meta = load(argv[1])
        out, new = bytearray(), {}
        for name, t in header.items():
            if name in argv[2:]:
                continue
            raw = tensor_bytes(data, base, t)
            new[name] = dict(t, data_offsets=[len(out), len(out) + len(raw)])
            out += raw
        meta["checksum"] = "crc32c:%08x" % checksum(out, 0, new, meta)
        write(argv[1], out, 0, new, meta)
        return 0
    if cmd == "overflow" and len(argv) == 3:
        da, ba, ha, _ = load(argv[1])
        db, bb, hb, _ = load(argv[2])
        out = set()
        for k in sorted(ha):
            if k.startswith("optim."):
                continue
            a = tensor_bytes(da, ba, ha[k])
            b = tensor_bytes(db, bb, hb[k]) if k in hb else None
            if k.endswith("num_batches_tracked"):
                ok = b is not None and array.array("q", a)[0] + 1 == array.array("q", b)[0]
                out.add("counter" if ok else "counter " + k)
            elif k.endswith(("running_mean", "running_var")):
                ok = all(map(math.isfinite, array.array("f", a))) and a != b
                out.add("stat" if ok else "stat " + k)
            else:
                out.add("weight" if a == b else "weight " + k)
        print(" ".join(sorted(out)))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


sys.exit(main(sys.argv[1:]))

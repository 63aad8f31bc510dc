#!/usr/bin/env python3
"""st_edit.py IN OUT [--drop KEY]... [--set KEY=VALUE]... [--drop-all]
[--nan TENSOR]: copies a safetensors file, editing its metadata (drop keys,
set keys, drop all of it) and optionally making the first value of an F32
tensor NaN; for tests that need checkpoints of older versions, other
programs' weights or damaged weights. The copy never keeps a "checksum"
entry: like those files it has none, so loading it verifies nothing
(tests/cli/st_tool.py writes files whose checksum matches). Standard
library only."""
import json
import struct
import sys


def main():
    src, dst, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    with open(src, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = bytearray(data[8 + n:])
    meta = header.pop("__metadata__", {})
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--drop-all":
            meta = {}
        elif a == "--drop":
            i += 1
            meta.pop(args[i], None)
        elif a == "--set":
            i += 1
            k, v = args[i].split("=", 1)
            meta[k] = v
        elif a == "--nan":
            i += 1
            t = header[args[i]]
            assert t["dtype"] == "F32", t
            b = t["data_offsets"][0]
            body[b:b + 4] = struct.pack("<f", float("nan"))
        else:
            sys.exit("unknown argument " + a)
        i += 1
    meta.pop("checksum", None)
    if meta:
        header = dict([("__metadata__", meta)] + list(header.items()))
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + bytes(body))


main()

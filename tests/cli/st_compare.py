#!/usr/bin/env python3
"""st_compare.py A B [--rtol R] [--prefix P]: compares the float32 tensors of
two safetensors files (names starting with --prefix, default all but the
optimiser's "optim." ones). Prints the largest relative difference, per
tensor max|a-b| / max(max|a|, tiny), and exits 1 when it exceeds --rtol or
the files hold different names or shapes. Standard library only."""
import array
import json
import struct
import sys


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    base = 8 + n
    out = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        out[name] = (t["dtype"], t["shape"], data[base + b:base + e])
    return out


def main():
    args = sys.argv[1:]
    rtol, prefix = 1e-5, None
    if "--rtol" in args:
        i = args.index("--rtol")
        rtol = float(args[i + 1])
        del args[i:i + 2]
    if "--prefix" in args:
        i = args.index("--prefix")
        prefix = args[i + 1]
        del args[i:i + 2]
    a, b = load(args[0]), load(args[1])
    keep = (lambda k: k.startswith(prefix)) if prefix else (lambda k: not k.startswith("optim."))
    names_a = sorted(k for k in a if keep(k))
    names_b = sorted(k for k in b if keep(k))
    if names_a != names_b:
        print("different tensor names:", set(names_a) ^ set(names_b))
        return 1
    worst, worst_name = 0.0, None
    for k in names_a:
        da, sa, ba = a[k]
        db, sb, bb = b[k]
        if (da, sa) != (db, sb):
            print("tensor %s: %s%s vs %s%s" % (k, da, sa, db, sb))
            return 1
        if da != "F32":
            if ba != bb:
                print("tensor %s differs" % k)
                return 1
            continue
        va, vb = array.array("f", ba), array.array("f", bb)
        scale = max((abs(x) for x in va), default=0.0) or 1e-30
        diff = max((abs(x - y) for x, y in zip(va, vb)), default=0.0)
        rel = diff / scale
        if rel > worst:
            worst, worst_name = rel, k
    print("tensors %d, largest relative difference %.3g (%s)" % (len(names_a), worst, worst_name))
    return 0 if worst <= rtol else 1


sys.exit(main())

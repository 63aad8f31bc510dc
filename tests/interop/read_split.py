#!/usr/bin/env python3
"""Reads an imshard split using only docs/FORMAT.md and the lmdb module.

usage: read_split.py MANIFEST.json [DUMP_DIR]
Checks every record's header and payload CRC-32C, the shard digests (format 2;
format 1 digests prove nothing and are skipped) and the class counts; with
DUMP_DIR writes each payload to DUMP_DIR/<index>.bin.
Prints "records N" and exits 0 when all is well.
"""
import json, os, struct, sys
import lmdb

T = [0] * 256
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    T[i] = c

def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = T[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF

def fnv1a64(data, h):
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h

man = json.load(open(sys.argv[1]))
assert man["format"] == "imshard" and man["format_version"] in (1, 2)
folder, counts, n = os.path.dirname(sys.argv[1]), [0] * len(man["classes"]), 0
for si, s in enumerate(man["shards"]):
    path = os.path.join(folder, s["path"])
    assert os.path.getsize(path) == s["bytes"], path
    env = lmdb.open(path, subdir=False, readonly=True, lock=False)
    i, digest = -1, fnv1a64(b"imshard-digest-2" + man["name"].encode() + b"\0" + struct.pack(">Q", si), 0xCBF29CE484222325)
    with env.begin() as txn:
        for i, (key, val) in enumerate(txn.cursor()):
            assert struct.unpack(">Q", key)[0] == s["first"] + i
            magic, ver, hlen = struct.unpack_from("<4sHH", val, 0)
            assert magic == b"IMSR" and ver == 1
            enc, flags, ch, orient, label, nx = struct.unpack_from("<BBBBiH", val, 8)
            plen, pcrc, hcrc = struct.unpack_from("<III", val, 36)
            assert hlen == 48 + 4 * nx and len(val) == hlen + plen and nx == man["extra_labels"]
            assert hcrc == crc32c(val[48:hlen], crc32c(val[:44])), "header crc"
            assert pcrc == crc32c(val[hlen:]), "payload crc"
            digest = fnv1a64(key + val[:hlen], digest)
            counts[label] += 1
            n += 1
            if len(sys.argv) > 2:
                open(os.path.join(sys.argv[2], "%d.bin" % (s["first"] + i)), "wb").write(val[hlen:])
    assert man["format_version"] == 1 or digest == int(s["digest"], 16), path + ": digest"
    assert i + 1 == s["records"], path
    env.close()
assert n == man["records"] and counts == man["class_counts"]
print("records", n)

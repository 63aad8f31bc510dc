#!/usr/bin/env python3
"""Where a training step's device time goes, kernel by kernel: reads the
CSV that `ncu --metrics gpu__time_duration.sum --csv --print-units base`
wrote for a few training steps of imshard-train and of torch_gpu.py, and
prints milliseconds per step by kernel family side by side, then each
side's costliest kernels.

    kernels.py IMSHARD.csv TORCH.csv [--skip-imshard 1] [--skip-torch 2]

Steps are told apart by the optimiser's kernels, which end every step
(imshard's sgd/adam, PyTorch's multi_tensor_apply): the kernels up to the
end of the first --skip-* optimiser groups (warm-up: cudnnFind, the
benchmark of cudnn.benchmark) are dropped, and so are those after the
last group (an unfinished step). TORCH.csv may be '-' (none).
Standard library only. Exit status: 0; 1 when a file holds no complete
step; 2 on bad usage.
"""
import argparse
import csv
import re
import sys

# first match wins: batch norm before convolution (cuDNN names both),
# convolution before conversions (its kernels say nhwc)
FAMILIES = [
    ("optimizer", r"\bsgd\b|\badam\b|multi_tensor|foreach|fused_sgd|fused_adam"),
    ("batchnorm", r"\bbn_|batch_?norm|welford|bn_fw|bn_bw"),
    ("loss", r"softmax|xent|nll|cross_entropy|tally"),
    ("pool", r"pool"),
    ("relu", r"relu|threshold|clamp"),
    ("conv/gemm", r"conv|xmma|cudnn|gemm|cutlass|sm\d\d_|implicit|wgrad|dgrad|fprop|winograd|cublas"),
    ("add", r"\badd|accumulate|Add"),
    ("convert", r"half|bf16|round_|copy|convert|cast|nchw|nhwc|transpose|fill|zero|unscale"),
]
OPTIMIZER = re.compile(FAMILIES[0][1], re.I)


def family(name):
    for fam, pat in FAMILIES:
        if re.search(pat, name, re.I):
            return fam
    return "other"


def read(path):
    """[(kernel name, ns)] in launch order"""
    rows = []
    with open(path, newline="") as f:
        lines = [ln for ln in f if ln.startswith('"')]  # ncu's own ==PROF== lines dropped
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        v = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "nsecond")
        v *= {"nsecond": 1, "usecond": 1e3, "msecond": 1e6, "second": 1e9}.get(unit, 1)
        rows.append((r["Kernel Name"], v))
    return rows


def steps(rows, skip):
    """the kernels of the complete steps after `skip` warm-up steps, and
    how many steps they are"""
    ends = []  # index one past each optimiser group
    for i, (name, _) in enumerate(rows):
        if OPTIMIZER.search(name) and (i + 1 == len(rows) or not OPTIMIZER.search(rows[i + 1][0])):
            ends.append(i + 1)
    if len(ends) <= skip:
        return [], 0
    start = ends[skip - 1] if skip > 0 else 0
    return rows[start:ends[-1]], len(ends) - skip


def by_family(rows, n):
    out = {}
    for name, ns in rows:
        fam = family(name)
        out[fam] = out.get(fam, 0.0) + ns / 1e6 / n
    return out


def top(rows, n, k=15):
    acc = {}
    for name, ns in rows:
        short = re.sub(r"\(.*", "", name)[:90]
        t, c = acc.get(short, (0.0, 0))
        acc[short] = (t + ns / 1e6 / n, c + 1)
    return sorted(acc.items(), key=lambda kv: -kv[1][0])[:k], n


def main():
    ap = argparse.ArgumentParser(description="device time per step by kernel family")
    ap.add_argument("imshard")
    ap.add_argument("torch")
    ap.add_argument("--skip-imshard", type=int, default=1)
    ap.add_argument("--skip-torch", type=int, default=2)
    a = ap.parse_args()
    sides = [("imshard", a.imshard, a.skip_imshard)]
    if a.torch != "-":
        sides.append(("torch", a.torch, a.skip_torch))
    fams, tops = [], []
    for label, path, skip in sides:
        rows, n = steps(read(path), skip)
        if not n:
            print(f"kernels.py: {path}: no complete step after {skip} warm-up step(s)", file=sys.stderr)
            return 1
        fams.append((label, n, by_family(rows, n)))
        tops.append((label, top(rows, n)))
    names = [f for f, _ in FAMILIES] + ["other"]
    head = "family".ljust(12) + "".join(f"{lab} ms/step".rjust(18) for lab, _, _ in fams)
    if len(fams) == 2:
        head += "imshard/torch".rjust(15)
    print(head + "   (steps: " + ", ".join(f"{lab} {n}" for lab, n, _ in fams) + ")")
    for f in names + ["total"]:
        vals = [sum(d.values()) if f == "total" else d.get(f, 0.0) for _, _, d in fams]
        if f != "total" and not any(vals):
            continue
        line = f.ljust(12) + "".join(f"{v:18.3f}" for v in vals)
        if len(vals) == 2:
            line += (f"{vals[0] / vals[1]:15.2f}" if vals[1] else "-".rjust(15))
        print(line)
    for label, (items, n) in tops:
        print(f"\n{label}: costliest kernels, ms per step (launches per step)")
        for name, (ms, c) in items:
            print(f"  {ms:8.3f}  {c / n:6.1f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

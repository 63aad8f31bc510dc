#!/usr/bin/env python3
"""bench/train-gpu's summary: reads run.sh's runs.tsv, each imshard run's
metrics.jsonl and each torch run's output line, prints a table and writes
RESULTS (JSON).

    summarize.py RUNS_TSV RESULTS_JSON

Per contender, over rounds: median images/s (imshard: the mean of the
train lines after the first interval, which holds start-up and cuDNN's
algorithm choice; torch: its timed steps), imshard's median data wait per
step, and GPU memory in use on the device (context, workspaces and
reserves included, every process: the contenders run one at a time):
imshard's largest mem_used_mib of its gpu lines (NVML; absent when NVML
is not there), torch's used_mib after its timed steps (absent in lines
of an older torch_gpu.py); and torch's max_memory_allocated (tensors
only, "torch tensors MiB"), which imshard has no figure like.
Ratios: each imshard row (<model>_<prec>_<input>) / torch in the same
precision (torch_<model>_<prec>; fp16 and bf16-nchw against torch's
bf16), round by round, and their median: the contenders of one round
ran minutes apart on the same machine, so a machine that changed between
rounds moves both sides of that round's ratio. imshard's whole-run rate
(summary.json's images_per_s: every step, start-up excluded) is kept
beside the interval rate, so a rate the wall clock disagrees with shows.
device_stacks: the distinct lines imshard's runs gave for what they ran
on (GPU, driver, cuDNN, cuBLAS and their files): more than one is
printed as a note.
Exits 1, RESULTS written, where every run of a contender failed.
Standard library only.
"""
import json
import os
import statistics
import sys


def summary(logdir):
    try:
        with open(os.path.join(logdir, "summary.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def imshard_run(logdir):
    rates, waits, mem = [], [], None
    path = os.path.join(logdir, "metrics.jsonl")
    if not os.path.exists(path):
        return None
    train = []
    with open(path) as f:
        for line in f:
            try:
                j = json.loads(line)
            except ValueError:
                continue
            if j.get("type") == "train":
                train.append(j)
            elif j.get("type") == "gpu":
                mem = max(mem or 0, j.get("mem_used_mib", 0))
    for j in train[1:] or train:
        rates.append(j["images_per_s"])
        waits.append(j["data_wait_ms"])
    if not rates:
        return None
    return {"images_per_s": sum(rates) / len(rates),
            "data_wait_ms": sum(waits) / len(waits), "gpu_mem_mib": mem,
            "run_images_per_s": summary(logdir).get("images_per_s"),
            "device_stack": summary(logdir).get("device_stack")}


def torch_run(log):
    with open(log) as f:
        text = f.read().split()
    kv = dict(t.split("=", 1) for t in text if "=" in t)
    if "images_per_s" not in kv:
        return None
    return {"images_per_s": float(kv["images_per_s"]),
            "gpu_mem_mib": float(kv["used_mib"]) if "used_mib" in kv else None,
            "tensor_mib": float(kv["max_mem_mib"]), "torch": kv.get("torch")}


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def main():
    if len(sys.argv) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    runs = {}
    with open(sys.argv[1]) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            rnd, name, wall, rc, log, logdir = line.rstrip("\n").split("\t")
            r = None
            if rc == "0":
                r = torch_run(log) if name.startswith("torch_") else imshard_run(logdir)
            runs.setdefault(name, []).append(r)
    out = {"meta": {k[5:].lower(): v for k, v in os.environ.items() if k.startswith("META_")},
           "contenders": {}}
    print("%-26s %12s %12s %12s %12s %12s %6s" % ("contender", "images/s", "whole run",
                                                   "wait ms", "GPU MiB", "tensors MiB", "runs"))
    for name, rs in runs.items():
        ok = [r for r in rs if r]
        c = {"runs": len(rs), "failed": len(rs) - len(ok),
             "images_per_s": med([r["images_per_s"] for r in ok]),
             "images_per_s_rounds": [r["images_per_s"] if r else None for r in rs],
             "run_images_per_s": med([r.get("run_images_per_s") for r in ok]),
             "data_wait_ms": med([r.get("data_wait_ms") for r in ok]),
             "gpu_mem_mib": max([r["gpu_mem_mib"] for r in ok if r.get("gpu_mem_mib")] or [0]) or None,
             "tensor_mib": max([r["tensor_mib"] for r in ok if r.get("tensor_mib")] or [0]) or None}
        out["contenders"][name] = c
        fmt = lambda v, f: (f % v) if v is not None else "-"
        print("%-26s %12s %12s %12s %12s %12s %6s" % (name, fmt(c["images_per_s"], "%.1f"),
                                                   fmt(c["run_images_per_s"], "%.1f"),
                                                   fmt(c["data_wait_ms"], "%.1f"),
                                              fmt(c["gpu_mem_mib"], "%.0f"),
                                              fmt(c["tensor_mib"], "%.0f"),
                                              "%d/%d" % (len(ok), len(rs))))
    ratios, ratio_rounds, mem_ratios = {}, {}, {}
    for name, c in out["contenders"].items():
        if name.startswith("torch_") or c["images_per_s"] is None:
            continue
        model, prec, _ = name.rsplit("_", 2)
        tprec = {"fp16": "bf16", "bf16-nchw": "bf16", "bf16-nograph": "bf16", "tf32-nchw": "tf32"}.get(prec, prec)
        tname = "torch_%s_%s" % (model, tprec)
        t = out["contenders"].get(tname)
        key = "%s / %s" % (name, tname)
        if t:
            rr = [a / b if a and b else None
                  for a, b in zip(c["images_per_s_rounds"], t["images_per_s_rounds"])]
            if any(r is not None for r in rr):
                ratio_rounds[key] = rr
                ratios[key] = med(rr)
        if t and t["gpu_mem_mib"] and c["gpu_mem_mib"]:
            mem_ratios["%s / %s" % (name, tname)] = c["gpu_mem_mib"] / t["gpu_mem_mib"]
    # what each imshard run said it ran on (imshard-train's "cuda:" line):
    # more than one means the rounds did not run the same libraries
    stacks = sorted({r["device_stack"] for rs in runs.values() for r in rs
                     if r and r.get("device_stack")})
    out["device_stacks"] = stacks
    if len(stacks) > 1:
        print("note: the imshard runs ran on %d different GPU stacks:" % len(stacks))
        for st in stacks:
            print("  " + st)
    out["ratios"] = ratios
    out["ratio_rounds"] = ratio_rounds
    out["memory_ratios"] = mem_ratios
    for k, v in ratios.items():
        print("%-48s %.3f (median of rounds: %s)" % (k, v, " ".join(
            "%.3f" % r if r is not None else "-" for r in ratio_rounds[k])))
    for k, v in mem_ratios.items():
        print("%-48s %.3f GPU memory" % (k, v))
    with open(sys.argv[2], "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    # a contender without one run that ran has no figures: the benchmark
    # failed (its results say which), not passed with a row of dashes
    none = [n for n, c in out["contenders"].items() if c["failed"] == c["runs"]]
    for n in none:
        c = out["contenders"][n]
        print("summarize.py: every run of %s failed (%d of %d): no figures for it in %s"
              % (n, c["failed"], c["runs"], sys.argv[2]), file=sys.stderr)
    return 1 if none else 0


if __name__ == "__main__":
    sys.exit(main())

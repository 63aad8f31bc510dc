#!/usr/bin/python3
"""Summarizes bench/train/run.sh: reads runs.tsv, model_flops' model lines
and each run's output (model_flops' and torch_step.py's key=value line;
imshard-train's LOGDIR/metrics.jsonl and LOGDIR/summary.json), prints the
tables and writes the results JSON.

    summarize.py RUNS.tsv MODEL_FLOPS.txt RESULTS.json   (metadata from META_*)

Rates of imshard-train are steady-state: the metrics intervals after the
first one (warm-up: first touch of the activations and workspace, the
loader's first batches), images over seconds summed over those intervals;
with several ranks, summed over ranks. Every ratio is computed within a
round; the median (min-max) over rounds is reported.
Exits 1, RESULTS written, where every run of a contender failed: a
contender without one figure fails the benchmark, not a row of dashes.
"""
import json
import os
import platform
import statistics
import sys
import time

MODELS = [("convnet7", 32), ("resnet18", 112)]
THREADS = [1, 2]
LOG_EVERY_META = {"convnet7": "META_C7_LOG_EVERY", "resnet18": "META_R18_LOG_EVERY"}


def label(name):
    if name.startswith("sgemm_t"):
        return "OpenBLAS sgemm, %s thread%s (GFLOP/s)" % (name[-1], "s" if name[-1] != "1" else "")
    if name.startswith("torch_"):
        m, t = name[6:].rsplit("_t", 1)
        return "PyTorch %s, %s thread%s" % (m, t, "s" if t != "1" else "")
    if name == "mpi_np1":
        return "MPI pair: 1 rank x 1 thread"
    if name == "mpi_np2":
        return "MPI pair: 2 ranks x 1 thread"
    if name == "mpi_np2_alt":
        return "MPI pair: 2 ranks x 1 thread, --bucket-mb %s" % os.environ.get("META_BUCKET_MB_ALT", "?")
    if name == "mpi_indep":
        return "MPI pair's ceiling: 2 independent 1-rank runs at once"
    m, t = name.rsplit("_t", 1)
    return "imshard-train %s, %s thread%s" % (m, t, "s" if t != "1" else "")


def parse_kv(path):
    """key=value pairs of the last line holding any."""
    try:
        lines = [l for l in open(path).read().splitlines() if "=" in l]
    except OSError:
        return None
    if not lines:
        return None
    out = {}
    for tok in lines[-1].split():
        if "=" in tok:
            k, v = tok.split("=", 1)
            try:
                out[k] = float(v)
            except ValueError:
                out[k] = v
    return out


def parse_train(logdir, warm_steps, batch):
    """Steady-state figures of one imshard-train run from its log folder."""
    try:
        summary = json.load(open(os.path.join(logdir, "summary.json")))
        lines = [json.loads(l) for l in open(os.path.join(logdir, "metrics.jsonl")) if l.strip()]
    except (OSError, ValueError):
        return None
    ranks = {}
    for j in lines:
        if j.get("type") == "train":
            ranks.setdefault(int(j["rank"]), []).append(j)
    if not ranks:
        return None
    total_rate, per_rank = 0.0, []
    for rank, js in sorted(ranks.items()):
        js.sort(key=lambda j: j["step"])
        prev, acc = 0, dict(steps=0, seconds=0.0, wait=0.0, compute=0.0, comm=0.0)
        for j in js:
            steps = int(j["step"]) - prev
            prev = int(j["step"])
            if j["step"] <= warm_steps or steps <= 0 or j["images_per_s"] <= 0:
                continue
            acc["steps"] += steps
            acc["seconds"] += steps * batch / j["images_per_s"]
            acc["wait"] += steps * j["data_wait_ms"]
            acc["compute"] += steps * j["compute_ms"]
            acc["comm"] += steps * j["comm_ms"]
        if not acc["steps"]:
            return None
        n = acc["steps"]
        r = {"rank": rank, "steps": n, "images_per_s": n * batch / acc["seconds"],
             "step_ms": 1e3 * acc["seconds"] / n, "data_wait_ms": acc["wait"] / n,
             "compute_ms": acc["compute"] / n, "comm_ms": acc["comm"] / n}
        r["other_ms"] = r["step_ms"] - r["data_wait_ms"] - r["compute_ms"] - r["comm_ms"]
        r["compute_images_per_s"] = 1e3 * batch / r["compute_ms"] if r["compute_ms"] > 0 else None
        per_rank.append(r)
        total_rate += r["images_per_s"]
    mean = lambda k: statistics.fmean(r[k] for r in per_rank)
    return {
        "images_per_s": total_rate,
        "measured_steps": per_rank[0]["steps"],
        "step_ms": mean("step_ms"), "data_wait_ms": mean("data_wait_ms"),
        "compute_ms": mean("compute_ms"), "comm_ms": mean("comm_ms"), "other_ms": mean("other_ms"),
        "compute_images_per_s": sum(r["compute_images_per_s"] or 0 for r in per_rank),
        "per_rank": per_rank,
        "summary": {k: summary.get(k) for k in ("world", "steps", "images", "train_s", "startup_s",
                                                  "wall_s", "images_per_s", "busy_s",
                                                  "busy_max_min_ratio", "stall_fraction")},
    }


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def main():
    runs_path, flops_path, results_path = sys.argv[1], sys.argv[2], sys.argv[3]
    e = os.environ
    batch = int(e.get("META_BATCH", 32))
    flops = {}
    for line in open(flops_path):
        kv = dict(t.split("=", 1) for t in line.split() if "=" in t)
        if "model" in kv:
            flops["%s:%s" % (kv["model"], kv["size"])] = {
                "macs": float(kv["macs"]), "train_flops": float(kv["train_flops"]),
                "params": int(kv["params"])}

    rows = []
    with open(runs_path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            rnd, name, wall, rss, rc, cpu, bg, log, logdir = line.rstrip("\n").split("\t")
            rows.append(dict(round=rnd, name=name, wall_s=float(wall), maxrss_kib=int(rss),
                             rc=int(rc), cpu_s=float(cpu), bg_cores=float(bg), log=log, logdir=logdir))
    names = []
    for r in rows:
        if r["name"] not in names:
            names.append(r["name"])
    per = {c: {} for c in names}  # name -> round -> run
    failed = []
    for r in rows:
        n = r["name"]
        out = None
        if r["rc"] == 0:
            if n.startswith("sgemm_t"):
                out = parse_kv(r["log"])
                if out and out.get("gflops"):
                    r["value"] = out["gflops"]
                    r["corename"] = out.get("corename")
                else:
                    out = None
            elif n.startswith("torch_"):
                out = parse_kv(r["log"])
                if out and out.get("images_per_s"):
                    r["value"] = out["images_per_s"]
                    r["torch"] = {k: out.get(k) for k in ("torch", "impl", "steps", "step_ms")}
                else:
                    out = None
            else:
                model = n.rsplit("_t", 1)[0] if not n.startswith("mpi_") else None
                warm = int(e.get(LOG_EVERY_META[model] if model else "META_MPI_LOG_EVERY", 1))
                out = parse_train(r["logdir"], warm, batch)
                if out and n == "mpi_indep":
                    # two single-rank runs: images/s add up
                    b = parse_train(r["logdir"] + ".b", warm, batch)
                    out = None if not b else dict(
                        out, images_per_s=out["images_per_s"] + b["images_per_s"],
                        per_rank=out["per_rank"] + b["per_rank"],
                        summary=dict(out["summary"], train_s=max(out["summary"]["train_s"] or 0,
                                                                 b["summary"]["train_s"] or 0)))
                if out:
                    r["value"] = out["images_per_s"]
                    r["train"] = out
        if out is None:
            failed.append({"round": r["round"], "contender": n, "rc": r["rc"], "log": r["log"]})
            continue
        per[n][r["round"]] = r

    contenders = {}
    for c in names:
        runs = list(per[c].values())
        entry = {
            "what": label(c),
            "unit": "GFLOP/s" if c.startswith("sgemm") else "images/s",
            "median": med([x["value"] for x in runs]),
            "rounds": {k: v["value"] for k, v in per[c].items()},
            "maxrss_mib_max": max([x["maxrss_kib"] / 1024 for x in runs], default=None),
            "wall_s_median": med([x["wall_s"] for x in runs]),
            "cpu_s_median": med([x["cpu_s"] for x in runs]),
            "bg_cores_median": med([x["bg_cores"] for x in runs]),
        }
        if c.startswith("sgemm"):
            entry["corename"] = sorted({x.get("corename") for x in runs if x.get("corename")})
        if c.startswith("torch_") and runs:
            entry["torch"] = runs[-1]["torch"]
        if runs and "train" in runs[0]:
            tr = [x["train"] for x in runs]
            entry["step_split_ms"] = {k: med([t[k] for t in tr]) for k in
                                      ("step_ms", "data_wait_ms", "compute_ms", "comm_ms", "other_ms")}
            entry["compute_images_per_s_median"] = med([t["compute_images_per_s"] for t in tr])
            entry["measured_steps"] = tr[0]["measured_steps"]
            entry["summary_median"] = {k: med([t["summary"][k] for t in tr])
                                       for k in ("train_s", "startup_s", "images_per_s", "images", "steps")}
        contenders[c] = entry

    # ratios: (name, what, target, function of one round -> value or None)
    ratios = {}

    def ratio(name, what, target, fn):
        vals = {}
        for rnd in sorted({r["round"] for r in rows}, key=int):
            try:
                v = fn(rnd)
            except (KeyError, TypeError, ZeroDivisionError):
                v = None
            if v is not None:
                vals[rnd] = v
        v = list(vals.values())
        m = med(v)
        ratios[name] = {"what": what, "rounds": vals, "median": m,
                        "min": min(v) if v else None, "max": max(v) if v else None, "target": target,
                        "verdict": None if target is None or m is None else ("met" if m >= target else "missed")}

    def val(c, rnd):
        return per[c][rnd]["value"]

    def train(c, rnd):
        return per[c][rnd]["train"]

    for model, size in MODELS:
        tf = flops["%s:%d" % (model, size)]["train_flops"]
        target = 0.5 if model == "resnet18" else None
        for t in THREADS:
            c = "%s_t%d" % (model, t)
            if c not in per:
                continue
            ratio("flop_fraction_%s" % c, "%s %dpx T%d: model FLOP rate / sgemm T%d" % (model, size, t, t),
                  target, lambda rnd, c=c, t=t: val(c, rnd) * tf / (1e9 * val("sgemm_t%d" % t, rnd)))
            ratio("flop_fraction_compute_%s" % c,
                  "%s %dpx T%d: compute-only FLOP rate / sgemm T%d" % (model, size, t, t), None,
                  lambda rnd, c=c, t=t: train(c, rnd)["compute_images_per_s"] * tf /
                  (1e9 * val("sgemm_t%d" % t, rnd)))
    for model, size in MODELS:
        for t in THREADS:
            c = "%s_t%d" % (model, t)
            if "torch_" + c in per:
                ratio("vs_torch_%s" % c, "%s %dpx T%d: imshard-train / PyTorch (images/s)" % (model, size, t),
                      1.0, lambda rnd, c=c: val(c, rnd) / val("torch_" + c, rnd))
                ratio("vs_torch_compute_%s" % c,
                      "%s %dpx T%d: imshard compute-only / PyTorch" % (model, size, t), None,
                      lambda rnd, c=c: train(c, rnd)["compute_images_per_s"] / val("torch_" + c, rnd))
    for model, size in MODELS:
        ratio("scaling_%s" % model, "%s %dpx: T2 / T1 (images/s)" % (model, size), None,
              lambda rnd, m=model: val(m + "_t2", rnd) / val(m + "_t1", rnd))
    ratio("scaling_sgemm", "sgemm: T2 / T1", None, lambda rnd: val("sgemm_t2", rnd) / val("sgemm_t1", rnd))
    if "mpi_indep" in per:
        ratio("mpi_ceiling", "two independent 1-rank runs at once / (2 x 1 rank alone): the pair's ceiling",
              None, lambda rnd: val("mpi_indep", rnd) / val("mpi_np1", rnd) / 2)
        ratio("mpi_ceiling_time", "the same by train_s: 1 rank alone / the slower of the two / 2",
              None, lambda rnd: train("mpi_np1", rnd)["summary"]["train_s"] /
              train("mpi_indep", rnd)["summary"]["train_s"] / 2)
    if "mpi_np2" in per:
        ratio("mpi_efficiency_speed", "MPI 2 ranks: speedup_speed / 2 (steady images/s)", 0.9,
              lambda rnd: val("mpi_np2", rnd) / val("mpi_np1", rnd) / 2)
        ratio("mpi_efficiency_time", "MPI 2 ranks: speedup_time / 2 (train_s, same work)", 0.9,
              lambda rnd: train("mpi_np1", rnd)["summary"]["train_s"] /
              train("mpi_np2", rnd)["summary"]["train_s"] / 2)
    if "mpi_np2_alt" in per:
        ratio("mpi_efficiency_speed_alt", "MPI 2 ranks, --bucket-mb %s: speedup_speed / 2" % e.get("META_BUCKET_MB_ALT"), 0.9,
              lambda rnd: val("mpi_np2_alt", rnd) / val("mpi_np1", rnd) / 2)
        ratio("mpi_efficiency_time_alt", "MPI 2 ranks, --bucket-mb %s: speedup_time / 2" % e.get("META_BUCKET_MB_ALT"), 0.9,
              lambda rnd: train("mpi_np1", rnd)["summary"]["train_s"] /
              train("mpi_np2_alt", rnd)["summary"]["train_s"] / 2)

    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    commands = dict(l.split("\t", 1) for l in e.get("META_COMMANDS", "").splitlines() if "\t" in l)
    corenames = sorted({n for c in ("sgemm_t1", "sgemm_t2") if c in contenders
                        for n in contenders[c].get("corename", [])})
    meta = {
        "command": e.get("META_COMMAND"), "version": e.get("META_VERSION"),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
        "rounds": int(e.get("META_ROUNDS", 0)), "batch_per_rank": batch,
        "train_images": int(e.get("META_TRAIN_IMAGES", 0)), "val_images": int(e.get("META_VAL_IMAGES", 0)),
        "openblas_coretype_env": e.get("META_CORETYPE") or None, "openblas_corename": corenames,
        "torch": e.get("META_TORCH") or None, "input": e.get("META_INPUT") or "loader",
        "mpi_model": e.get("META_MPI_MODEL"), "mpi_steps_2_ranks": int(e.get("META_MPI_STEPS", 0)),
        "model_flops": flops,
        "flops_convention": "training FLOPs per image = 3 x 2 x forward MACs (nn_model_macs: "
                            "convolutions and linear layers; forward, input-gradient and "
                            "weight-gradient GEMMs)",
        "rates": "imshard-train: steady state, metrics intervals after the first, images/s "
                 "summed over ranks; sgemm: GFLOP/s over S seconds of N x N calls; torch: "
                 "synthetic input, after 2 warm-up steps",
        "commands": commands,
    }
    results = {"meta": meta, "contenders": contenders, "ratios": ratios, "failed_runs": failed,
               "runs": [{k: v for k, v in r.items() if k != "train"} for r in rows]}
    with open(results_path, "w") as f:
        json.dump(results, f, indent=2)

    def fmt(x, p=1):
        return "-" if x is None else "%.*f" % (p, x)

    print("command: %s" % meta["command"])
    print("imshard: %s; %s, %d cores; OpenBLAS core %s%s; torch %s; %d rounds; batch %d; "
          "%d training images; imshard-train input: %s"
          % (meta["version"], cpu, meta["cores"], "/".join(corenames) or "?",
             " (OPENBLAS_CORETYPE=%s)" % meta["openblas_coretype_env"] if meta["openblas_coretype_env"] else "",
             meta["torch"] or "not run", meta["rounds"], batch, meta["train_images"],
             "--synthetic (a fixed random batch, nothing decoded)" if meta["input"] == "synthetic"
             else "the loader (decoding the packed split)"))
    print("model FLOPs per training image (3 x 2 x forward MACs): %s" % ", ".join(
        "%s %.3f GFLOP" % (k, v["train_flops"] / 1e9) for k, v in flops.items()))
    print()
    print("| contender | rate (median, min-max) | peak RSS MiB | CPU s | bg cores |")
    print("| --- | --- | --- | --- | --- |")
    for c in names:
        x = contenders[c]
        rs = list(x["rounds"].values())
        print("| %s | %s (%s-%s) %s | %s | %s | %s |" % (
            x["what"].replace(" (GFLOP/s)", ""), fmt(x["median"]), fmt(min(rs) if rs else None),
            fmt(max(rs) if rs else None), "GFLOP/s" if x["unit"] == "GFLOP/s" else "img/s",
            fmt(x["maxrss_mib_max"]), fmt(x["cpu_s_median"], 2), fmt(x["bg_cores_median"], 2)))
    print()
    print("| imshard-train step (ms, medians) | step | data wait | compute | comm | other | compute-only img/s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for c in names:
        s = contenders[c].get("step_split_ms")
        if not s:
            continue
        print("| %s | %s | %s | %s | %s | %s | %s |" % (
            contenders[c]["what"].replace("imshard-train ", ""), fmt(s["step_ms"]), fmt(s["data_wait_ms"]),
            fmt(s["compute_ms"]), fmt(s["comm_ms"]), fmt(s["other_ms"]),
            fmt(contenders[c]["compute_images_per_s_median"])))
    print()
    print("| in-run ratio (median of rounds, min-max) | value | target | verdict |")
    print("| --- | --- | --- | --- |")
    for name, r in ratios.items():
        if "_compute_" in name or not r["rounds"]:  # compute-only ratios: JSON only
            continue
        print("| %s | %s (%s-%s) | %s | %s |" % (
            r["what"], fmt(r["median"], 2), fmt(r["min"], 2), fmt(r["max"], 2),
            ">= %.1f" % r["target"] if r["target"] else "info", r["verdict"] or "-"))
    if "mpi_np2" in contenders and contenders["mpi_np2"].get("summary_median"):
        a, b = contenders["mpi_np1"]["summary_median"], contenders["mpi_np2"]["summary_median"]
        print()
        print("MPI pair (%s, batch %d per rank): 1 rank %s steps, %s images, train_s %s; "
              "2 ranks %s steps each, %s images, train_s %s (medians; train_s includes the "
              "validation pass, start-up excluded)"
              % (meta["mpi_model"], batch, fmt(a["steps"], 0), fmt(a["images"], 0), fmt(a["train_s"], 2),
                 fmt(b["steps"], 0), fmt(b["images"], 0), fmt(b["train_s"], 2)))
    if failed:
        print()
        print("failed runs: %s" % ", ".join("%s/%s (rc %s)" % (f["round"], f["contender"], f["rc"]) for f in failed))
    print()
    print("results: %s" % results_path)
    code = 0
    for c in names:
        if not per[c]:
            tried = sum(1 for r in rows if r["name"] == c)
            print("summarize.py: every run of %s failed (%d of %d): no figures for it in %s"
                  % (c, tried, tried, results_path), file=sys.stderr)
            code = 1
    return code


if __name__ == "__main__":
    sys.exit(main())

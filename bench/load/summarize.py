#!/usr/bin/python3
"""Summarizes bench/load/run.sh: reads runs.tsv and each run's log (the
loader's JSON object, the key=value lines of full_decode and the Python
baseline), prints the table and writes the results JSON.

    summarize.py RUNS.tsv RESULTS.json     (metadata from META_* variables)

Exits 1, RESULTS written, where every run of a contender failed: a
contender without one figure fails the benchmark, not a row of dashes.
"""
import json
import os
import platform
import statistics
import sys
import time

CONTENDERS = ["loader_t1", "loader_t2", "full_decode", "python_p1", "python_p2"]
LABELS = {
    "loader_t1": "imshard bench-load, 1 thread",
    "loader_t2": "imshard bench-load, 2 threads",
    "full_decode": "full_decode (libjpeg-turbo full size, 1 thread)",
    "python_p1": "Python PIL+numpy, 1 process",
    "python_p2": "Python PIL+numpy, Pool(2)",
}
# (name, numerator, denominator, target or None, what)
RATIOS = [
    ("t1_vs_full_decode", "loader_t1", "full_decode", 1.0, "loader T1 / full decode (per thread)"),
    ("scaling_t2_vs_t1", "loader_t2", "loader_t1", 1.8, "loader T2 / loader T1 (90% scaling)"),
    ("t1_vs_python_p1", "loader_t1", "python_p1", 3.0, "loader T1 / Python 1 process"),
    ("t2_vs_python_p2", "loader_t2", "python_p2", None, "loader T2 / Python Pool(2)"),
    ("t2_vs_full_decode", "loader_t2", "full_decode", None, "loader T2 / full decode (1 thread)"),
    ("python_p2_vs_p1", "python_p2", "python_p1", None, "Python Pool(2) / 1 process"),
]
STAGES = ["read_seconds", "decode_seconds", "augment_seconds"]


def parse_log(path):
    """The loader's JSON object, or key=value pairs of the last line."""
    try:
        text = open(path).read().strip()
    except OSError:
        return None
    if not text:
        return None
    start = text.find("{")
    if start >= 0:
        try:
            return json.loads(text[start:text.rindex("}") + 1])
        except ValueError:
            pass
    out = {}
    for tok in text.splitlines()[-1].split():
        if "=" in tok:
            k, v = tok.split("=", 1)
            try:
                out[k] = float(v)
            except ValueError:
                out[k] = v
    return out or None


def med(xs):
    return statistics.median(xs) if xs else None


def main():
    runs_path, results_path = sys.argv[1], sys.argv[2]
    e = os.environ
    rows = []
    with open(runs_path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            rnd, name, wall, rss, rc, cpu, bg, log = line.rstrip("\n").split("\t")
            rows.append(dict(round=rnd, name=name, wall_s=float(wall), maxrss_kib=int(rss),
                             rc=int(rc), cpu_s=float(cpu), bg_cores=float(bg), log=log))
    per = {c: {} for c in CONTENDERS}  # name -> round -> run
    failed = []
    for r in rows:
        out = parse_log(r["log"])
        rate = out.get("images_per_s") if out else None
        if r["rc"] != 0 or not rate:
            failed.append({"round": r["round"], "contender": r["name"], "rc": r["rc"], "log": r["log"]})
            continue
        r["images_per_s"] = float(rate)
        r["images"] = out.get("images")
        r["output"] = out
        per[r["name"]][r["round"]] = r

    contenders = {}
    for c in CONTENDERS:
        runs = list(per[c].values())
        rates = [x["images_per_s"] for x in runs]
        entry = {
            "what": LABELS[c],
            "images_per_s_median": med(rates),
            "images_per_s_rounds": {k: v["images_per_s"] for k, v in per[c].items()},
            "images_per_run": med([x["images"] for x in runs if x["images"]]),
            "maxrss_mib_median": med([x["maxrss_kib"] / 1024 for x in runs]),
            "maxrss_mib_max": max([x["maxrss_kib"] / 1024 for x in runs], default=None),
            "wall_s_median": med([x["wall_s"] for x in runs]),
            "cpu_s_median": med([x["cpu_s"] for x in runs]),
            "bg_cores_median": med([x["bg_cores"] for x in runs]),
        }
        if c.startswith("loader") and runs:
            outs = [x["output"] for x in runs]
            split = {}
            for k in STAGES + ["wait_seconds", "seconds"]:
                split[k] = med([float(o.get(k, 0)) for o in outs])
            busy = sum(split[k] for k in STAGES)
            n = med([float(o.get("images", 0)) for o in outs]) or 1
            split["us_per_image"] = {k.replace("_seconds", ""): 1e6 * split[k] / n for k in STAGES}
            split["shares"] = {k.replace("_seconds", ""): (split[k] / busy if busy else None) for k in STAGES}
            split["wait_share_of_run"] = split["wait_seconds"] / split["seconds"] if split["seconds"] else None
            split["bad_records"] = max(int(o.get("bad_records", 0)) for o in outs)
            split["pinned"] = outs[-1].get("pinned")
            split["batches_median"] = med([float(o.get("batches", 0)) for o in outs])
            entry["stages"] = split
        contenders[c] = entry

    ratios = {}
    for name, num, den, target, what in RATIOS:
        vals = {}
        for rnd in per[num]:
            if rnd in per[den]:
                vals[rnd] = per[num][rnd]["images_per_s"] / per[den][rnd]["images_per_s"]
        v = list(vals.values())
        m = med(v)
        ratios[name] = {
            "what": what, "rounds": vals, "median": m,
            "min": min(v) if v else None, "max": max(v) if v else None,
            "target": target,
            "verdict": None if target is None or m is None else ("met" if m >= target else "missed"),
        }

    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    meta = {
        "command": e.get("META_COMMAND"), "version": e.get("META_VERSION"),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
        "corpus": e.get("META_CORPUS"), "corpus_images": int(e.get("META_IMAGES", 0)),
        "corpus_bytes": int(e.get("META_CORPUS_BYTES", 0)),
        "python_images": int(e.get("META_PYIMAGES", 0)), "rounds": int(e.get("META_ROUNDS", 0)),
        "page_cache": "warm (corpus files and packed shards read once before round 1)",
        "rates": "each contender's own images/s (first image to last; process start excluded)",
        "commands": {"loader_t1": e.get("META_L1"), "loader_t2": e.get("META_L2"),
                     "full_decode": e.get("META_FD"), "python_p1": e.get("META_P1"),
                     "python_p2": e.get("META_P2")},
    }
    results = {"meta": meta, "contenders": contenders, "ratios": ratios,
               "failed_runs": failed, "runs": [{k: v for k, v in r.items() if k != "output"} for r in rows]}
    with open(results_path, "w") as f:
        json.dump(results, f, indent=2)

    def fmt(x, p=1):
        return "-" if x is None else "%.*f" % (p, x)

    print("command: %s" % meta["command"])
    print("imshard: %s; %s, %d cores; %d images (%d MB); %d rounds; Python on %d images"
          % (meta["version"], cpu, meta["cores"], meta["corpus_images"],
             meta["corpus_bytes"] // 1000000, meta["rounds"], meta["python_images"]))
    print()
    print("| contender | img/s (median, min-max) | peak RSS MiB | CPU s | bg cores |")
    print("| --- | --- | --- | --- | --- |")
    for c in CONTENDERS:
        x = contenders[c]
        rs = list(x["images_per_s_rounds"].values())
        print("| %s | %s (%s-%s) | %s | %s | %s |" % (
            x["what"], fmt(x["images_per_s_median"]), fmt(min(rs) if rs else None),
            fmt(max(rs) if rs else None), fmt(x["maxrss_mib_max"]), fmt(x["cpu_s_median"], 2),
            fmt(x["bg_cores_median"], 2)))
    print()
    print("| in-run ratio (median of rounds, min-max) | value | target | verdict |")
    print("| --- | --- | --- | --- |")
    for name, _, _, target, what in RATIOS:
        r = ratios[name]
        print("| %s | %s (%s-%s) | %s | %s |" % (
            what, fmt(r["median"], 2), fmt(r["min"], 2), fmt(r["max"], 2),
            ">= %.1f" % target if target else "info", r["verdict"] or "-"))
    fd = contenders["full_decode"]["images_per_s_median"]
    for c in ("loader_t1", "loader_t2"):
        s = contenders[c].get("stages")
        if not s:
            continue
        print()
        print("%s stage split (medians; stage seconds summed over workers):" % c)
        print("  read %s s, decode %s s, augment %s s; consumer wait %s s of %s s (%s%%); bad records %s; pinned %s"
              % (fmt(s["read_seconds"], 2), fmt(s["decode_seconds"], 2), fmt(s["augment_seconds"], 2),
                 fmt(s["wait_seconds"], 2), fmt(s["seconds"], 2),
                 fmt(100 * s["wait_share_of_run"] if s["wait_share_of_run"] is not None else None),
                 s["bad_records"], s["pinned"]))
        u, sh = s["us_per_image"], s["shares"]
        print("  per image: read %s us (%s%%), decode %s us (%s%%), augment %s us (%s%%)"
              % tuple(v for k in ("read", "decode", "augment")
                      for v in (fmt(u[k], 0), fmt(100 * sh[k] if sh[k] is not None else None))))
        if fd:
            print("  full-size decode (full_decode): %s us per image" % fmt(1e6 / fd, 0))
    if failed:
        print()
        print("failed runs: %s" % ", ".join("%s/%s (rc %s)" % (f["round"], f["contender"], f["rc"]) for f in failed))
    print()
    print("results: %s" % results_path)
    return none_ran(rows, per, results_path)


def none_ran(rows, per, results_path):
    """1, each named on stderr, where a contender ran and none of its
    runs gave a figure; else 0."""
    code = 0
    for c in CONTENDERS:
        tried = sum(1 for r in rows if r["name"] == c)
        if tried and not per[c]:
            print("summarize.py: every run of %s failed (%d of %d): no figures for it in %s"
                  % (c, tried, tried, results_path), file=sys.stderr)
            code = 1
    return code


if __name__ == "__main__":
    sys.exit(main())

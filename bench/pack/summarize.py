#!/usr/bin/python3
"""Helpers for bench/pack/run.sh: list statistics and the final summary.

    summarize.py listinfo LIST ROOT [LIMIT]
        prints "<images> <input_bytes>" for the first LIMIT entries (0: all)
    summarize.py repeat LIST TIMES OUT
        writes OUT: LIST repeated TIMES over with distinct indexes 0..
    summarize.py report RUNS.tsv META.json OUT.json
        prints the table of medians and in-run ratios, writes OUT.json

RUNS.tsv columns: round, contender, threads, images, input_bytes, wall_s,
maxrss_kib, rc. Rates use wall time from GNU time (process start to exit,
output durably written where the contender writes any) and the bytes of the
input files: MB/s is 10^6 input bytes per second for every contender.
"""
import json
import os
import statistics
import sys

# (name in the table, numerator contender, denominator contender, metric,
#  target or None). Each ratio is computed within a round, then the median
# over rounds is reported.
RATIOS = [
    ("keep pack / file copy (MB/s)", "pack_keep", "copy", "mb_per_s", 0.70),
    ("resize pack T1 / floor T1 (img/s)", "pack_resize_t1", "floor_t1", "images_per_s", 0.85),
    ("resize pack T2 / floor T2 (img/s)", "pack_resize_t2", "floor_t2", "images_per_s", 0.85),
    ("resize pack T2 / python (img/s)", "pack_resize_t2", "python", "images_per_s", 4.0),
    ("resize pack T2 / T1 (img/s)", "pack_resize_t2", "pack_resize_t1", "images_per_s", None),
    ("floor T2 / T1 (img/s)", "floor_t2", "floor_t1", "images_per_s", None),
]

ORDER = ["copy", "pack_keep", "pack_resize_t1", "floor_t1", "pack_resize_t2",
         "floor_t2", "python"]

RSS_LIMIT_MIB = 256


def listinfo(lst, root, limit=0):
    images = nbytes = 0
    with open(lst) as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if len(fields) < 3:
                continue
            nbytes += os.path.getsize(os.path.join(root, fields[-1]))
            images += 1
            if limit and images >= limit:
                break
    return images, nbytes


def repeat(lst, times, out):
    with open(lst) as f:
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    index = 0
    with open(out, "w") as f:
        for _ in range(times):
            for fields in rows:
                f.write("\t".join([str(index)] + fields[1:]) + "\n")
                index += 1


def read_runs(path):
    runs = []
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            fields = line.split()
            rnd, name, threads, images, nbytes, wall, rss, rc = fields[:8]
            cpu, bg = (float(fields[8]), float(fields[9])) if len(fields) >= 10 else (0.0, 0.0)
            wall = float(wall)
            runs.append({
                "round": rnd, "contender": name, "threads": int(threads),
                "images": int(images), "input_bytes": int(nbytes), "wall_s": wall,
                "maxrss_mib": int(rss) / 1024.0, "rc": int(rc),
                "cpu_s": cpu, "bg_cores": bg,
                "images_per_s": int(images) / wall if wall > 0 else 0.0,
                "mb_per_s": int(nbytes) / 1e6 / wall if wall > 0 else 0.0,
            })
    return runs


def fmt(x, nd=1):
    return "-" if x is None else ("%.*f" % (nd, x))


def report(runs_path, meta_path, out_path):
    with open(meta_path) as f:
        meta = json.load(f)
    runs = read_runs(runs_path)
    failed = [r for r in runs if r["rc"] != 0]
    ok = [r for r in runs if r["rc"] == 0]

    timed = [r for r in ok if r["round"].isdigit()]
    rounds = sorted({int(r["round"]) for r in timed})
    by = {}
    for r in timed:
        by.setdefault(r["contender"], {})[int(r["round"])] = r

    contenders = {}
    for name in ORDER + sorted(set(by) - set(ORDER)):
        if name not in by:
            continue
        rs = list(by[name].values())
        contenders[name] = {
            "command": meta.get("commands", {}).get(name),
            "threads": rs[0]["threads"],
            "images": rs[0]["images"],
            "input_bytes": rs[0]["input_bytes"],
            "rounds": len(rs),
            "median_wall_s": statistics.median(r["wall_s"] for r in rs),
            "median_images_per_s": statistics.median(r["images_per_s"] for r in rs),
            "median_mb_per_s": statistics.median(r["mb_per_s"] for r in rs),
            "median_peak_rss_mib": statistics.median(r["maxrss_mib"] for r in rs),
            "max_peak_rss_mib": max(r["maxrss_mib"] for r in rs),
            "median_cpu_s": statistics.median(r["cpu_s"] for r in rs),
            "median_bg_cores": statistics.median(r["bg_cores"] for r in rs),
            "per_round_images_per_s": [round(by[name][k]["images_per_s"], 2)
                                       for k in sorted(by[name])],
        }

    ratios = []
    for label, num, den, metric, target in RATIOS:
        per_round = []
        for k in rounds:
            a, b = by.get(num, {}).get(k), by.get(den, {}).get(k)
            if a and b and b[metric] > 0:
                per_round.append(a[metric] / b[metric])
        if not per_round:
            continue
        med = statistics.median(per_round)
        ratios.append({
            "ratio": label, "numerator": num, "denominator": den, "metric": metric,
            "per_round": [round(x, 3) for x in per_round],
            "median": med, "min": min(per_round), "max": max(per_round),
            "target": target,
            "meets_target": None if target is None else med >= target,
        })

    size_check = []
    for r in ok:
        if r["round"].startswith("size"):
            extra = meta.get("rss_samples", {}).get(r["round"] + ":" + r["contender"], {})
            size_check.append({
                "run": r["round"], "contender": r["contender"], "images": r["images"],
                "input_bytes": r["input_bytes"], "wall_s": r["wall_s"],
                "images_per_s": r["images_per_s"], "peak_rss_mib": r["maxrss_mib"],
                "peak_rss_anon_mib": extra.get("anon_mib"),
                "peak_rss_file_mib": extra.get("file_mib"),
                "under_limit": r["maxrss_mib"] < RSS_LIMIT_MIB,
            })

    result = {"meta": meta, "contenders": contenders, "ratios": ratios,
              "size_check": size_check, "rss_limit_mib": RSS_LIMIT_MIB,
              "failed_runs": failed}
    tmp = out_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    os.replace(tmp, out_path)

    p = print
    p()
    p("bench/pack  %s" % ("DRY RUN: pack replaced by stand-ins (cp -r, jpeg_floor)"
                          if meta.get("dry_run") else ""))
    p("corpus: %s images, %.1f MB (%s); %d rounds, page cache warm (corpus read "
      "once before round 1)" % (meta.get("corpus_images"),
                                meta.get("corpus_bytes", 0) / 1e6,
                                meta.get("corpus"), len(rounds)))
    p("machine: %s, %s cores; %s" % (meta.get("cpu"), meta.get("cores"),
                                      meta.get("imshard_version")))
    p()
    p("%-16s %3s %6s %8s %8s %7s %8s %8s %7s %7s" % (
        "contender", "thr", "images", "wall s", "img/s", "MB/s", "RSS MiB", "RSS max",
        "CPU s", "bg cpu"))
    for name, c in contenders.items():
        p("%-16s %3s %6d %8s %8s %7s %8s %8s %7s %7s" % (
            name, c["threads"] or "-", c["images"], fmt(c["median_wall_s"], 2),
            fmt(c["median_images_per_s"]), fmt(c["median_mb_per_s"]),
            fmt(c["median_peak_rss_mib"]), fmt(c["max_peak_rss_mib"]),
            fmt(c["median_cpu_s"], 2), fmt(c["median_bg_cores"], 2)))
    p("(medians over rounds; MB/s = 10^6 input bytes per wall second; thr - = the"
      " command's default;\n CPU s = the run's user+system seconds; bg cpu = cores"
      " busy with other work on the machine meanwhile)")
    p()
    p("%-36s %7s %7s %7s %7s  %s" % ("in-run ratio", "median", "min", "max", "target",
                                     "per round"))
    for r in ratios:
        verdict = "" if r["target"] is None else ("ok" if r["meets_target"] else "MISSED")
        p("%-36s %7.3f %7.3f %7.3f %7s  %s %s" % (
            r["ratio"], r["median"], r["min"], r["max"],
            "-" if r["target"] is None else (">=%.2f" % r["target"]),
            " ".join("%.3f" % x for x in r["per_round"]), verdict))
    if size_check:
        p()
        p("peak RSS vs dataset size (limit %d MiB):" % RSS_LIMIT_MIB)
        p("%-10s %-16s %7s %9s %9s %9s %9s" % ("run", "contender", "images", "img/s",
                                              "RSS MiB", "anon MiB", "file MiB"))
        for s in size_check:
            p("%-10s %-16s %7d %9s %9s %9s %9s %s" % (
                s["run"], s["contender"], s["images"], fmt(s["images_per_s"]),
                fmt(s["peak_rss_mib"]), fmt(s["peak_rss_anon_mib"]),
                fmt(s["peak_rss_file_mib"]), "" if s["under_limit"] else "OVER"))
    if failed:
        p()
        p("FAILED runs (excluded): " + ", ".join("%s/%s rc=%d" % (r["round"], r["contender"],
                                                                  r["rc"]) for r in failed))
    p()
    p("command: %s" % meta.get("command"))
    p("json: %s" % out_path)
    return 1 if failed else 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "listinfo":
        images, nbytes = listinfo(argv[2], argv[3], int(argv[4]) if len(argv) > 4 else 0)
        print(images, nbytes)
        return 0
    if len(argv) == 5 and argv[1] == "repeat":
        repeat(argv[2], int(argv[3]), argv[4])
        return 0
    if len(argv) == 5 and argv[1] == "report":
        return report(argv[2], argv[3], argv[4])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))

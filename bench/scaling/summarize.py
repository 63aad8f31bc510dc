#!/usr/bin/python3
"""Summarizes bench/scaling/run.sh from the CSV files `imshard report
--csv` wrote for each round: the runs (steady images/s per rank, train_s,
accuracy, time to the target) and the scaling comparisons (speedup and
efficiency both ways), each round's and, with several rounds, the median
(min-max) over rounds.

    summarize.py WORK ROUNDS     (the command that made them from META_COMMAND)
"""
import csv
import os
import statistics
import sys


def num(s, fmt="%.3g"):
    try:
        return fmt % float(s)
    except ValueError:
        return "n/a"


def main():
    work, rounds = sys.argv[1], int(sys.argv[2])
    comparisons = {}
    print("command: %s" % os.environ.get("META_COMMAND", "(not given)"))
    print("each run's command line: %s/commands.txt\n" % work)
    print("## Runs\n")
    print("| round | run | ranks | batch / rank (global) | steady images/s per rank | "
          "train_s | final top-1 | epochs, s to target | busy max/min | loader stall |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in range(1, rounds + 1):
        for row in csv.DictReader(open("%s/r%d/csv/runs.csv" % (work, r))):
            target = "not reached"
            if row["target_reached"] == "1":
                target = "%s, %s" % (num(row["target_epochs"], "%g"), num(row["target_wall_s"], "%.2f"))
            print("| %d | %s | %s | %s (%s) | %s | %s | %s | %s | %s | %s |" % (
                r, row["run"], row["world"], num(row["batch_per_rank"], "%g"),
                num(row["global_batch"], "%g"), num(row["speed_per_rank"], "%.1f"),
                num(row["train_s"], "%.2f"), num(row["final_top1"], "%.3f"), target,
                num(row["busy_max_min"], "%.3f"), num(row["stall_fraction"], "%.3f")))
        for row in csv.DictReader(open("%s/r%d/csv/scaling.csv" % (work, r))):
            if row["run"] == row["baseline"] or not row["baseline"]:
                continue
            key = (row["mode"], row["run"], row["baseline"])
            comparisons.setdefault(key, []).append((r, row))
    print("\n## Scaling\n")
    if not comparisons:
        # one world size at one batch: nothing to compare a run against
        print("no comparison: each round ran one configuration; give "
              "WORLDS or BATCHES more than one value to measure scaling")
        return
    print("| round | same | run vs baseline | speedup_speed | efficiency | speedup_time | "
          "efficiency | steady steps' time speedup |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for (mode, run, base), rows in sorted(comparisons.items()):
        for r, row in rows:
            print("| %d | %s | %s vs %s | %s | %s | %s%s | %s | %s |" % (
                r, mode.replace("_", " "), run, base, num(row["speedup_speed"]),
                num(row["efficiency_speed"]), num(row["speedup_time"]),
                " (per image)" if row["time_per_image"] == "1" else "",
                num(row["efficiency_time"]), num(row["steady_speedup_time"])))
    if rounds > 1:
        print("\n## Over %d rounds: median (min-max)\n" % rounds)
        print("| same | run vs baseline | speedup_speed | speedup_time |")
        print("| --- | --- | --- | --- |")
        for (mode, run, base), rows in sorted(comparisons.items()):
            cells = []
            for k in ("speedup_speed", "speedup_time"):
                v = [float(row[k]) for _, row in rows if row[k]]
                cells.append("%.3g (%.3g-%.3g)" % (statistics.median(v), min(v), max(v))
                             if v else "n/a")
            print("| %s | %s vs %s | %s | %s |" % (mode.replace("_", " "), run, base, *cells))


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# bench/train/memory.sh - activation memory and step time of imshard-train
# against the previous binary and PyTorch: per case (model, input side,
# batch), on THREADS threads, synthetic input (--synthetic; torch_step.py's
# fixed randn batch), every run timed by GNU time for its peak RSS:
#   - imshard-train (IMSHARD_TRAIN) and the previous binary (BASE_TRAIN),
#     ROUNDS rounds each, interleaved (even rounds in reverse order), each
#     run STEPS steps; the planned activation bytes (per image) from
#     summary.json; the step time as the mean of the steps after the
#     first (metrics.jsonl, --log-every 1: data wait + compute + comm),
#     and per round the ratio new / previous; the median of the ratios;
#   - PyTorch (torch_step.py --memory --warmup 0 --steps 2): its peak RSS
#     for two steps, the bytes autograd saves for backward per image and
#     the resident memory the first step grows by (torch_step.py --help).
#
#     BASE_TRAIN=/path/to/previous/imshard-train bench/train/memory.sh
#
# Settings (environment; defaults in brackets):
#   IMSHARD_TRAIN  the binary measured [build/tools/imshard-train]
#   BASE_TRAIN     the previous binary; empty: no ratios, no previous runs []
#   IMSHARD        makes the data set [build/tools/imshard]
#   DATA           sample images and packed splits, made when absent
#                  (--train gives the class list; nothing is decoded):
#                  new, empty or an earlier run's [/tmp/imshard-bench-memory-data]
#   CASES          model:size:batch:steps ... [resnet18:112:32:6 resnet50:224:16:3]
#   THREADS        threads of every contender [2]
#   ROUNDS         rounds of the imshard pair per case [3]
#   TORCH          auto: torch contenders when torch imports, 0: none [auto]
#   TORCH_PYTHON   [python3]; TORCH_LIB  added to PYTHONPATH [/tmp/imshard-torchlib]
#   WORK           logs: new, empty or an earlier run's [/tmp/imshard-bench-memory-work]
#   RESULTS        JSON written at the end [$WORK/results.json]
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
bench_args "$@"

IMSHARD_TRAIN=$(abspath "${IMSHARD_TRAIN:-build/tools/imshard-train}")
BASE_TRAIN=${BASE_TRAIN:-}
[ -z "$BASE_TRAIN" ] || BASE_TRAIN=$(abspath "$BASE_TRAIN")
IMSHARD=$(abspath "${IMSHARD:-build/tools/imshard}")
DATA=$(abspath "${DATA:-/tmp/imshard-bench-memory-data}")
CASES=${CASES:-resnet18:112:32:6 resnet50:224:16:3}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
TORCH=${TORCH:-auto}
TORCH_PYTHON=${TORCH_PYTHON:-python3}
TORCH_LIB=$(abspath "${TORCH_LIB:-/tmp/imshard-torchlib}")
WORK=$(abspath "${WORK:-/tmp/imshard-bench-memory-work}")
RESULTS=$(abspath "${RESULTS:-$WORK/results.json}")

bench_need_count THREADS ROUNDS
# WORK's logs/ is emptied below, and DATA's images/ and packed/ made
# anew when absent: folders of other things are refused, their files kept
bench_own_work .bench-memory results.json
bench_gnu_time
for b in "$IMSHARD_TRAIN" "$IMSHARD" ${BASE_TRAIN:+"$BASE_TRAIN"}; do
	[ -x "$b" ] || die "cannot find '$b' (build it, or set IMSHARD_TRAIN, IMSHARD, BASE_TRAIN)"
done
case "$TORCH" in auto | 0) ;; *) die "TORCH must be auto or 0, got '$TORCH'" ;; esac
bench_mark_work .bench-memory
rm -rf "${WORK:?}/logs"
mkdir -p "$WORK/logs"

bench_sample_data .data-pc80-val2 80 --per-class-val 2
torch_env=(env)
[ -d "$TORCH_LIB" ] && torch_env+=("PYTHONPATH=$TORCH_LIB${PYTHONPATH:+:$PYTHONPATH}")
use_torch=0
if [ "$TORCH" = auto ] && "${torch_env[@]}" "$TORCH_PYTHON" -c 'import torch, torchvision' 2>/dev/null; then
	use_torch=1
else
	echo "memory.sh: no torch contenders (TORCH=$TORCH, or torch/torchvision do not import)" >&2
fi

# run NAME CMD...: one timed run, logs in $WORK/logs/NAME.{out,time}
run() {
	local name=$1
	shift
	echo "memory.sh: $name: $*" >&2
	"$TIME" -f '%e %M' -o "$WORK/logs/$name.time" "$@" >"$WORK/logs/$name.out" 2>&1 ||
		die "$name failed: see $WORK/logs/$name.out"
}

trainer() { # trainer NAME BINARY MODEL SIZE BATCH STEPS
	local dir="$WORK/logs/$1.d"
	run "$1" "$2" --train "$DATA/packed/train.json" --val "$DATA/packed/val.json" \
		--model "$3" --size "$4" --batch-size "$5" --threads "$THREADS" --synthetic \
		--epochs 1 --max-steps "$6" --log-every 1 --log-dir "$dir" --quiet
}

for c in $CASES; do
	IFS=: read -r model size batch steps <<<"$c"
	for r in $(seq 1 "$ROUNDS"); do
		bench_order "$r" new base
		for who in "${order[@]}"; do
			[ "$who" = base ] && [ -z "$BASE_TRAIN" ] && continue
			bin=$IMSHARD_TRAIN
			[ "$who" = base ] && bin=$BASE_TRAIN
			trainer "${model}_${who}_r$r" "$bin" "$model" "$size" "$batch" "$steps"
		done
	done
	if [ "$use_torch" = 1 ]; then
		run "${model}_torch" env OMP_NUM_THREADS="$THREADS" "${torch_env[@]}" \
			"$TORCH_PYTHON" "$here/torch_step.py" --model "$model" --size "$size" \
			--batch "$batch" --threads "$THREADS" --warmup 0 --steps 2 --memory
	fi
done

"$TORCH_PYTHON" - "$WORK/logs" "$RESULTS" "$CASES" "$ROUNDS" "$THREADS" <<'PY'
import json, os, statistics, sys

logs, out, cases, rounds, threads = sys.argv[1], sys.argv[2], sys.argv[3].split(), int(sys.argv[4]), int(sys.argv[5])
MIB = 1 << 20


def timed(name):
    p = os.path.join(logs, name + ".time")
    if not os.path.exists(p):
        return None
    wall, kib = open(p).read().split()[-2:]
    return {"wall_s": float(wall), "peak_rss_bytes": int(kib) * 1024}


def trainer(name):
    t = timed(name)
    if t is None:
        return None
    d = os.path.join(logs, name + ".d")
    s = json.load(open(os.path.join(d, "summary.json")))
    lines = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl"))]
    steps = [l for l in lines if l["type"] == "train"][1:]
    t["step_ms"] = statistics.mean(l["data_wait_ms"] + l["compute_ms"] + l["comm_ms"] for l in steps)
    t["activation_bytes"] = s.get("activation_bytes")
    t["activation_bytes_per_image"] = s.get("activation_bytes_per_image")
    return t


res = {"threads": threads, "rounds": rounds, "cases": {}}
print("%-9s %5s %5s | %-28s | %-28s | %-34s | %s" % (
    "model", "size", "batch", "peak RSS MiB: new / prev / torch", "activations MiB/image",
    "torch MiB/image: saved / fwd / peak", "step new/prev (median, rounds)"))
for c in cases:
    model, size, batch, steps = c.split(":")
    new = [trainer("%s_new_r%d" % (model, r)) for r in range(1, rounds + 1)]
    base = [trainer("%s_base_r%d" % (model, r)) for r in range(1, rounds + 1)]
    torch = None
    p = os.path.join(logs, model + "_torch.out")
    if os.path.exists(p):
        kv = dict(f.split("=", 1) for f in open(p).read().split() if "=" in f)
        torch = {k: kv[k] for k in ("saved_bytes_per_image", "forward_rss_bytes_per_image",
                                    "peak_step_rss_bytes_per_image", "step_ms", "torch") if k in kv}
        torch.update(timed(model + "_torch") or {})
    ratios = [n["step_ms"] / b["step_ms"] for n, b in zip(new, base) if n and b]
    case = {"model": model, "size": int(size), "batch": int(batch), "steps": int(steps),
            "new": new, "previous": [b for b in base if b], "torch": torch,
            "step_ratio_new_over_previous": ratios,
            "step_ratio_median": statistics.median(ratios) if ratios else None}
    res["cases"][c] = case
    med = lambda runs, k: statistics.median(r[k] for r in runs if r) if any(runs) else float("nan")
    print("%-9s %5s %5s | %8.0f / %6.0f / %6.0f     | %8.2f                     | %6.2f / %6.2f / %6.2f            | %s (%s)" % (
        model, size, batch, med(new, "peak_rss_bytes") / MIB,
        med(base, "peak_rss_bytes") / MIB if any(base) else float("nan"),
        torch["peak_rss_bytes"] / MIB if torch else float("nan"),
        new[0]["activation_bytes_per_image"] / MIB,
        int(torch["saved_bytes_per_image"]) / MIB if torch else float("nan"),
        int(torch["forward_rss_bytes_per_image"]) / MIB if torch else float("nan"),
        int(torch["peak_step_rss_bytes_per_image"]) / MIB if torch else float("nan"),
        "%.3f" % case["step_ratio_median"] if ratios else "-",
        " ".join("%.3f" % r for r in ratios)))
json.dump(res, open(out, "w"), indent=1)
print("results: %s" % out)
PY

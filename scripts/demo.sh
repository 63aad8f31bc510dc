#!/usr/bin/env bash
#   scripts/demo.sh [OUT]
#   scripts/demo.sh -h | --help   prints this text
#
# The main job on the built-in sample data: installs dependencies, builds,
# generates the sample image set, converts it into packed train and val
# splits, verifies them, trains convnet7 on the CPU and prints validation
# accuracy and images/s. Output goes to OUT (default out/, relative to the
# repository root): OUT/sample, OUT/packed and OUT/run, replaced.
set -euo pipefail
case "${1:-}" in
-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
-*) echo "demo.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "demo.sh: unexpected argument '$2': it takes one folder (see --help)" >&2; exit 2; }
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh build >/dev/null
out=${1:-out}
imshard=build/tools/imshard
train=build/tools/imshard-train
set -x
$imshard sample "$out/sample" --classes 10 --per-class 60 --force
$imshard convert folder "$out/sample" -o "$out/packed" --val-ratio 0.2 --seed 1 --force
$imshard verify "$out/packed/train.json" --decode
$imshard verify "$out/packed/val.json" --decode
$imshard info "$out/packed/train.json"
$train --train "$out/packed/train.json" --val "$out/packed/val.json" \
	--model convnet7 --size 32 --epochs 15 --batch-size 32 --lr 0.05 \
	--warmup-epochs 1 --log-every 15 \
	--log-dir "$out/run" --checkpoint-dir "$out/run" --force
set +x
python3 - "$out/run/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print("demo: best validation top-1 %.1f%% (epoch %d), %.0f images/s, %.1f s of training"
      % (100 * s["best_val_top1"], s["best_epoch"] + 1, s["images_per_s"], s["train_s"]))
sys.exit(0 if s["best_val_top1"] >= 0.9 else 1)
PY

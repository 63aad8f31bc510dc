#!/usr/bin/env bash
# The main job on the built-in sample data: installs dependencies, builds,
# generates the sample image set, lists it, packs train and val splits,
# verifies them and prints what they hold. Output goes to out/ (or $1).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh build >/dev/null
out=${1:-out}
imshard=build/tools/imshard
set -x
$imshard sample "$out/sample" --classes 10 --per-class 40 --force
$imshard list "$out/sample" -o "$out/sample" --train-ratio 0.8 --seed 1
$imshard pack "$out/sample_train.lst" "$out/sample" -o "$out/packed/train" --force
$imshard pack "$out/sample_val.lst" "$out/sample" -o "$out/packed/val" --force
$imshard verify "$out/packed/train.json" --decode
$imshard verify "$out/packed/val.json" --decode
$imshard info "$out/packed/train.json"

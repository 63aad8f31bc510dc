#!/usr/bin/env bash
# imshard-train learns: the README demo's run (convnet7 on the built-in
# sample set, 32 px, 15 epochs on the CPU) reaches >= 90% validation top-1.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1
: "${IMSHARD_TRAIN:?IMSHARD_TRAIN must point at imshard-train}"
expect 0 "$IMSHARD" sample "$T/s" --classes 10 --per-class 60 --quiet
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/p" --val-ratio 0.2 --seed 1 --quiet
expect 0 "$IMSHARD_TRAIN" --train "$T/p/train.json" --val "$T/p/val.json" \
	--model convnet7 --size 32 --epochs 15 --batch-size 32 --lr 0.05 \
	--warmup-epochs 1 --log-dir "$T/run" --quiet
same "$(json "$T/run/summary.json" 'j["best_val_top1"] >= 0.9')" True \
	"best top-1 $(json "$T/run/summary.json" 'j["best_val_top1"]')"
same "$(json "$T/run/summary.json" 'j["val_top1"] >= 0.85')" True "final top-1"
finish

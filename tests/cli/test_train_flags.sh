#!/usr/bin/env bash
# imshard-train: flags taken as given and outputs checked before the
# first step. A --weight-decay given with --optimizer adam or adamw is
# the one used (the old code replaced 1e-4, sgd's default, by the
# optimiser's); --checkpoint-every without --checkpoint-dir is bad usage
# (it did nothing).
source "$IMS_TESTLIB"
: "${IMSHARD_TRAIN:?IMSHARD_TRAIN must point at imshard-train}"

expect 0 "$IMSHARD" sample "$T/s" --classes 4 --per-class 15 --quiet
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/p" --val-ratio 0.25 --seed 3 --quiet
tr="$T/p/train.json"
va="$T/p/val.json"
fit() { "$IMSHARD_TRAIN" --train "$tr" --model convnet7 --size 16 --threads 1 --batch-size 8 --quiet "$@"; }
decay() { json "$1/summary.json" 'j["options"]["weight_decay"]'; }

# --- --weight-decay is the user's, whatever its value ---------------------
expect 0 fit --max-steps 1 --optimizer adam --weight-decay 1e-4 --log-dir "$T/wd_adam"
same "$(decay "$T/wd_adam")" 0.0001 "(adam, --weight-decay 1e-4 given)"
expect 0 fit --max-steps 1 --optimizer adamw --weight-decay 0.0001 --log-dir "$T/wd_adamw"
same "$(decay "$T/wd_adamw")" 0.0001 "(adamw, --weight-decay 0.0001 given)"
# the defaults: each optimiser's own
expect 0 fit --max-steps 1 --optimizer adam --log-dir "$T/wd_adam0"
same "$(decay "$T/wd_adam0")" 0 "(adam's default)"
expect 0 fit --max-steps 1 --optimizer adamw --log-dir "$T/wd_adamw0"
same "$(decay "$T/wd_adamw0")" 0.01 "(adamw's default)"
expect 0 fit --max-steps 1 --log-dir "$T/wd_sgd0"
same "$(decay "$T/wd_sgd0")" 0.0001 "(sgd's default)"

# --- --checkpoint-every needs somewhere to write ------------------------
expect 2 fit --max-steps 1 --checkpoint-every 1
one_line "$T/err"
contains "$T/err" "--checkpoint-every needs --checkpoint-dir"
expect 0 fit --max-steps 1 --checkpoint-every 0

finish

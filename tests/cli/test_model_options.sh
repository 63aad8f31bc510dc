#!/usr/bin/env bash
# imshard eval, predict and export: every option that changes what the
# network sees or what a file records takes effect. --size, --mean, --std
# and --val-crop-frac change predict's logits and eval's loss, and export
# records them so that the exported file predicts and evaluates as the
# checkpoint does with those flags; --model and --classes let export and
# predict take weights that record neither; --force replaces a file.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1
: "${IMSHARD_TRAIN:?IMSHARD_TRAIN must point at imshard-train}"

expect 0 "$IMSHARD" sample "$T/s" --classes 4 --per-class 15 --quiet
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/p" --val-ratio 0.25 --seed 3 --quiet
va="$T/p/val.json"
expect 0 "$IMSHARD_TRAIN" --train "$T/p/train.json" --val "$va" --model convnet7 --size 16 \
  --threads 1 --batch-size 8 --epochs 2 --checkpoint-dir "$T/run" --quiet
ck="$T/run/checkpoint.safetensors"
img="$T/s/circle/circle_0000.jpg"

# logits WEIGHTS [FLAGS...]: the image's logits, rounded
logits() {
  "$IMSHARD" predict "$1" "$img" "${@:2}" --json --logits --threads 1 -q >"$T/lg" ||
    fail "predict $* failed: $(cat "$T/err" 2>/dev/null)"
  json "$T/lg" '[round(v, 5) for v in j["logits"]]'
}
# loss WEIGHTS [FLAGS...]: eval's mean loss on the val split
loss() {
  "$IMSHARD" eval "$1" "$va" "${@:2}" --json --threads 1 -q >"$T/ev" ||
    fail "eval $* failed"
  json "$T/ev" 'round(j["loss"], 6)'
}
base_logits=$(logits "$ck")
base_loss=$(loss "$ck")

# Each flag: predict and eval differ from the recorded values' results,
# and the file export writes with the flag gives what the flag gave.
n=0
for flags in "--size 24" "--mean 10,20,30" "--std 50,60,70" "--val-crop-frac 0.5"; do
  n=$((n + 1))
  # shellcheck disable=SC2086
  with=$(logits "$ck" $flags)
  checks=$((checks + 1))
  [ "$with" != "$base_logits" ] || fail "predict $flags gave the logits without it"
  # shellcheck disable=SC2086
  wloss=$(loss "$ck" $flags)
  checks=$((checks + 1))
  [ "$wloss" != "$base_loss" ] || fail "eval $flags gave the loss without it"
  # shellcheck disable=SC2086
  expect 0 "$IMSHARD" export "$ck" -o "$T/e$n.safetensors" $flags -q
  same "$(logits "$T/e$n.safetensors")" "$with" "(predict, exported with $flags)"
  same "$(loss "$T/e$n.safetensors")" "$wloss" "(eval, exported with $flags)"
done

# Weights that record no model or classes (other programs'): --model and
# --classes supply them, with --size/--mean/--std; the results are the
# checkpoint's.
/usr/bin/python3 "$IMS_SRC/tests/cli/st_edit.py" "$ck" "$T/bare.safetensors" --drop-all
card=(--model convnet7 --classes "$T/p/classes.txt" --size 16
      --mean 123.675,116.28,103.53 --std 58.395,57.12,57.375)
expect 2 "$IMSHARD" export "$T/bare.safetensors" -o "$T/b.safetensors"
contains "$T/err" "--model NAME --classes FILE"
expect 0 "$IMSHARD" export "$T/bare.safetensors" -o "$T/b.safetensors" "${card[@]}" -q
same "$(logits "$T/b.safetensors")" "$base_logits" "(exported with --model, --classes)"
same "$(logits "$T/bare.safetensors" "${card[@]}")" "$base_logits" "(predict --model, --classes)"
same "$(loss "$T/bare.safetensors" "${card[@]}")" "$base_loss" "(eval --model, --classes)"
expect 0 "$IMSHARD" predict "$T/bare.safetensors" "$img" "${card[@]}" --top 1 -q
contains "$T/out" "circle"
# another class file: other names printed for the same logits
sed 's/^/x_/' "$T/p/classes.txt" >"$T/other.txt"
expect 0 "$IMSHARD" predict "$T/bare.safetensors" "$img" "${card[@]:0:2}" --classes "$T/other.txt" \
  "${card[@]:4}" --top 4 -q
contains "$T/out" "x_circle"
lacks "$T/out" " circle"

# --force replaces the file (and only with it)
expect 1 "$IMSHARD" export "$ck" -o "$T/e1.safetensors" -q
same "$(logits "$T/e1.safetensors")" "$(logits "$ck" --size 24)" "(refused export left the file)"
expect 0 "$IMSHARD" export "$ck" -o "$T/e1.safetensors" --force -q
same "$(logits "$T/e1.safetensors")" "$base_logits" "(export --force replaced the file)"
# -f and --output are --force's and -o's other names
expect 0 "$IMSHARD" export "$ck" --output "$T/e1.safetensors" -f --size 24 -q
same "$(logits "$T/e1.safetensors")" "$(logits "$ck" --size 24)" "(export --output, -f replaced the file)"
# the notes (a replaced value, the file written) unless -q or --quiet
expect 0 "$IMSHARD" export "$ck" -o "$T/e1.safetensors" -f --size 24
same "$(cat "$T/err")" "imshard: export: --size 24 in place of the 16 px '$ck' records
imshard: export: wrote 34 tensors of convnet7 to '$T/e1.safetensors'" "(export's notes)"
for q in -q --quiet; do
  expect 0 "$IMSHARD" export "$ck" -o "$T/e1.safetensors" -f --size 24 $q
  same "$(cat "$T/err")" "" "(export $q: no notes)"
done

# a --size that changes convnet7's layers (below 16: its pooling stops
# earlier): the refusal names the sizes (before: "written for another
# model or class count?", which it was not)
expect 1 "$IMSHARD" eval "$ck" "$va" --size 8 -q
one_line "$T/err"
contains "$T/err" "its card records size 16, and this model is built for size 8 (--size), which changes convnet7's layers"
expect 1 "$IMSHARD" predict "$ck" "$img" --size 8 -q
contains "$T/err" "its card records size 16, and this model is built for size 8 (--size)"

# the run's folder given for its checkpoint: refused, the file in it named
# (before: "not a regular file (a folder)" alone); a folder without one
# is refused as before
expect 1 "$IMSHARD" eval "$T/run" "$va" -q
one_line "$T/err"
contains "$T/err" "not a regular file (a folder); the run's checkpoint in it is '$T/run/checkpoint.safetensors'"
expect 1 "$IMSHARD" predict "$T/run" "$img" -q
contains "$T/err" "the run's checkpoint in it is '$T/run/checkpoint.safetensors'"
expect 1 "$IMSHARD" export "$T/run" -o "$T/fromdir.safetensors" -q
contains "$T/err" "the run's checkpoint in it is '$T/run/checkpoint.safetensors'"
absent "$T/fromdir.safetensors"
expect 1 "$IMSHARD" eval "$T/s" "$va" -q
contains "$T/err" "not a regular file (a folder)"
lacks "$T/err" "the run's checkpoint"

finish

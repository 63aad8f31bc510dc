#!/usr/bin/env bash
# imshard export into PyTorch: for each model of IMS_EXPORT_MODELS, a
# checkpoint of one training step is exported, loaded into torchvision's
# model (examples/convnet7.py for convnet7) with load_state_dict(strict=True),
# and its logits on a batch of images equal imshard predict's within
# export_torch.py's tolerance. Skipped (77) where torch, torchvision or
# safetensors do not import (PYTHONPATH names where they are).
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1
: "${IMSHARD_TRAIN:?IMSHARD_TRAIN must point at imshard-train}"
py() { /usr/bin/python3 "$IMS_SRC/tests/cli/export_torch.py" "$@"; }

mkdir -p "$T/img"
py images "$T/img" 6 >"$T/py" 2>&1
case $? in
  0) ;;
  77) cat "$T/py"; rm -rf "$T"; exit 77 ;;
  *) fail "export_torch.py images failed"; cat "$T/py" >&2; finish ;;
esac
images=$(ls "$T/img"/*.png)

expect 0 "$IMSHARD" sample "$T/s" --classes 3 --per-class 8 --quiet
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/p" --val-ratio 0.25 --seed 1 --quiet
for model in ${IMS_EXPORT_MODELS:-convnet7 resnet18}; do
  # one step moves the weights and the batch-norm statistics off their
  # initial values, so names or layouts that were swapped would show; a
  # small --lr keeps the logits near 1 (at 0.1, one step of resnet50 from
  # scratch gives logits of 1e35), where the tolerance means something
  expect 0 "$IMSHARD_TRAIN" --train "$T/p/train.json" --val "$T/p/val.json" --model "$model" --size 32 --threads 2 \
    --batch-size 4 --lr 0.001 --max-steps 1 --checkpoint-dir "$T/$model" --quiet
  ck="$T/$model/checkpoint.safetensors"
  # --val-crop-frac 1: the 32 x 32 images are fed as they are, as the
  # Python side reads them
  expect 0 "$IMSHARD" export "$ck" -o "$T/$model.safetensors" --val-crop-frac 1
  contains "$T/err" "tensors of $model"
  expect 0 "$IMSHARD" predict "$T/$model.safetensors" $images --json --logits --threads 2 -q
  cp "$T/out" "$T/$model.jsonl"
  run py check "$T/$model.safetensors" "$T/$model.jsonl" $images
  checks=$((checks + 1))
  [ "$rc" = 0 ] || fail "$model: exported weights do not load or give other logits in PyTorch"
  cat "$T/out" "$T/err"
  contains "$T/out" "ok"
done

finish

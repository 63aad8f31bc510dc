"""Loads an `imshard export` file into the PyTorch model with strict=True
and compares its logits with imshard predict's on the same images.

usage: export_torch.py check WEIGHTS.safetensors PREDICT.jsonl IMAGE... 
       export_torch.py images DIR N      (writes N random 32x32 PNGs)
Exit 77 when torch, torchvision or safetensors do not import (a skip)."""
import json
import os
import sys

try:
    import torch
    import torchvision
    import safetensors.torch
    from safetensors import safe_open
except ImportError as e:  # no torch here: the test is skipped, not passed
    print("skipped: %s" % e)
    sys.exit(77)

sys.path.insert(0, os.path.join(os.environ["IMS_SRC"], "examples"))
from convnet7 import ConvNet7  # noqa: E402

# |imshard - torch| <= TOL * max(1, max |logit|): fp32 convolutions summed
# in other orders (im2col/Winograd against oneDNN) differ in the last bits.
TOL = 1e-4


def images(out, n):
    g = torch.Generator().manual_seed(7)
    for i in range(n):
        x = torch.randint(0, 256, (3, 32, 32), generator=g, dtype=torch.uint8)
        torchvision.io.write_png(x, os.path.join(out, "img%d.png" % i))


def check(weights, predictions, paths):
    with safe_open(weights, "pt") as f:
        meta = f.metadata()
    name, classes, size = meta["model"], int(meta["classes"]), int(meta["size"])
    mean = torch.tensor([float(v) for v in meta["mean"].split(",")]).view(3, 1, 1)
    std = torch.tensor([float(v) for v in meta["std"].split(",")]).view(3, 1, 1)
    if name == "convnet7":
        m = ConvNet7(num_classes=classes, size=size)
    else:
        m = getattr(torchvision.models, name)(num_classes=classes)
    state = safetensors.torch.load_file(weights)
    assert not [k for k in state if k.startswith("optim.")], "optimiser state exported"
    m.load_state_dict(state, strict=True)  # raises on any missing or extra key
    m.eval()
    x = torch.stack([(torchvision.io.read_image(p).float() - mean) / std for p in paths])
    with torch.no_grad():
        ref = m(x)
    got = [json.loads(l)["logits"] for l in open(predictions)]
    assert len(got) == len(paths), (len(got), len(paths))
    got = torch.tensor(got, dtype=torch.float32)
    diff = (got - ref).abs().max().item()
    scale = max(1.0, ref.abs().max().item())
    print("%s: %d tensors, max |logit| %.4g, max diff %.3g" % (name, len(state), scale, diff))
    assert diff <= TOL * scale, "logits differ by %g (tolerance %g)" % (diff, TOL * scale)
    print("ok")


if __name__ == "__main__":
    if sys.argv[1] == "images":
        images(sys.argv[2], int(sys.argv[3]))
    else:
        check(sys.argv[2], sys.argv[3], sys.argv[4:])

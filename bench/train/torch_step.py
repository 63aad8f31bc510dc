#!/usr/bin/env python3
"""The PyTorch side of bench/train: the same model, batch and thread count
as imshard-train, on synthetic input, timing what one training step does
(forward, cross-entropy, backward, SGD step with momentum 0.9 and weight
decay 1e-4, batch norm in training mode, dropout on).

    torch_step.py --model convnet7|resnet18|resnet50 --size PX --batch B
                  --threads T [--classes 10] [--steps N] [--warmup W]
                  [--seconds S] [--memory]

Runs W untimed steps, then N timed steps (more while fewer than S seconds
have passed), and prints one line
    model=... size=... batch=... threads=... steps=... seconds=...
    images_per_s=... step_ms=... torch=2.x.y
convnet7 is written out from docs/TRAINING.md (imshard's own network);
resnet18 is torchvision's when torchvision imports, otherwise the same
architecture written out here (torchvision's BasicBlock ResNet-18);
resnet50 needs torchvision.

--memory measures the first step's activations and appends to the line:
  saved_bytes         what autograd keeps for backward (the tensors its
                      saved-tensor hooks see, each storage once, the
                      parameters and the input batch left out)
  forward_rss_bytes   resident memory after the forward and loss minus
                      before them (the first step: nothing cached yet)
  peak_step_rss_bytes the most resident memory seen at the end of any
                      module's forward or any autograd node's backward in
                      that step, minus the resident memory before it
and each of them per image (..._per_image).
Exit status: 0, 1 when torch (or torchvision for resnet50) is missing,
2 on bad usage.
"""
import argparse
import os
import sys
import time


def convnet7(nn, classes):
    # five 3x3 conv (no bias) + BN + ReLU blocks, 2x2 max pool after the
    # first four while the map is at least 2x2 (always, from 32x32 up),
    # global average pool, linear 256 -> 256, ReLU, dropout 0.2, linear.
    layers, c = [], 3
    for i, w in enumerate((32, 64, 128, 256, 256)):
        layers += [nn.Conv2d(c, w, 3, 1, 1, bias=False), nn.BatchNorm2d(w), nn.ReLU(inplace=True)]
        if i < 4:
            layers.append(nn.MaxPool2d(2, 2))
        c = w
    return nn.Sequential(
        nn.Sequential(*layers), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(256, 256), nn.ReLU(inplace=True), nn.Dropout(0.2), nn.Linear(256, classes))


def resnet18_written(nn, classes):
    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                                nn.BatchNorm2d(cout))

        def forward(self, x):
            y = self.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return self.relu(y + (x if self.downsample is None else self.downsample(x)))

    layers, cin = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                   nn.MaxPool2d(3, 2, 1)], 64
    for i, w in enumerate((64, 128, 256, 512)):
        layers += [Block(cin, w, 1 if i == 0 else 2), Block(w, w, 1)]
        cin = w
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes)]
    return nn.Sequential(*layers)


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, choices=["convnet7", "resnet18", "resnet50"])
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=0)
    ap.add_argument("--memory", action="store_true")
    a = ap.parse_args()
    try:
        import torch
        from torch import nn
    except ImportError as e:
        print("torch_step.py: cannot import torch: %s" % e, file=sys.stderr)
        return 1
    torch.set_num_threads(a.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    torch.manual_seed(1)
    impl = "written"
    if a.model == "convnet7":
        model = convnet7(nn, a.classes)
    elif a.model == "resnet50":
        try:
            import torchvision
        except ImportError as e:
            print("torch_step.py: resnet50 needs torchvision: %s" % e, file=sys.stderr)
            return 1
        model = torchvision.models.resnet50(num_classes=a.classes)
        impl = "torchvision " + torchvision.__version__
    else:
        try:
            import torchvision
            model = torchvision.models.resnet18(num_classes=a.classes)
            impl = "torchvision " + torchvision.__version__
        except Exception:  # missing, or built for another torch
            model = resnet18_written(nn, a.classes)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(a.batch, 3, a.size, a.size)
    y = torch.randint(0, a.classes, (a.batch,))
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    mem = ""
    if a.memory:
        mem = " " + measure_memory(torch, model, opt, loss_fn, x, y, a.batch)
    for _ in range(a.warmup):
        step()
    n, t0 = 0, time.perf_counter()
    while n < a.steps or time.perf_counter() - t0 < a.seconds:
        loss = step()
        n += 1
    dt = time.perf_counter() - t0
    print("model=%s size=%d batch=%d threads=%d steps=%d seconds=%.3f images_per_s=%.3f "
          "step_ms=%.2f loss=%.4f torch=%s impl=%s mkldnn=%s"
          "%s"
          % (a.model, a.size, a.batch, torch.get_num_threads(), n, dt, n * a.batch / dt,
             1e3 * dt / n, loss.item(), torch.__version__, impl.replace(" ", "_"),
             torch.backends.mkldnn.is_available(), mem))
    return 0


def measure_memory(torch, model, opt, loss_fn, x, y, batch):
    """One training step with autograd's saved tensors counted and the
    resident memory sampled at the end of every module's forward and of
    every autograd node's backward."""
    skip = {p.untyped_storage().data_ptr() for p in model.parameters()}
    skip.add(x.untyped_storage().data_ptr())
    seen, saved = set(), [0]

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in skip and s.data_ptr() not in seen:
            seen.add(s.data_ptr())
            saved[0] += s.nbytes()
        return t

    peak = [0]

    def sample(*_):
        peak[0] = max(peak[0], rss_bytes())

    hooks = [m.register_forward_hook(sample) for m in model.modules()]
    opt.zero_grad(set_to_none=True)
    r0 = rss_bytes()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = loss_fn(model(x), y)
    r1 = rss_bytes()
    # every backward node of the graph samples when it has run
    todo, nodes = [loss.grad_fn], set()
    while todo:
        fn = todo.pop()
        if fn is None or fn in nodes:
            continue
        nodes.add(fn)
        hooks.append(fn.register_hook(sample))
        todo.extend(f for f, _ in fn.next_functions)
    loss.backward()
    sample()
    opt.step()
    for h in hooks:
        h.remove()
    fwd, top = r1 - r0, peak[0] - r0
    return ("saved_bytes=%d saved_bytes_per_image=%d forward_rss_bytes=%d "
            "forward_rss_bytes_per_image=%d peak_step_rss_bytes=%d "
            "peak_step_rss_bytes_per_image=%d"
            % (saved[0], saved[0] // batch, fwd, fwd // batch, top, top // batch))


if __name__ == "__main__":
    sys.exit(main())

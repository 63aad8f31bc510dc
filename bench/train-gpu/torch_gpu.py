#!/usr/bin/env python3
"""The PyTorch side of bench/train-gpu: the same model and batch as
imshard-train --device cuda, on one GPU, synthetic input, timing what one
training step does (forward, cross-entropy, backward, SGD step with
momentum 0.9 and weight decay 1e-4; batch norm in training mode).

    torch_gpu.py --model convnet7|resnet18|resnet50 --size PX --batch B
                 --precision fp32|tf32|bf16 [--classes 10] [--steps N]
                 [--warmup W] [--seconds S] [--no-channels-last]

fp32: plain fp32 with TF32 off (torch.backends.cuda.matmul.allow_tf32 and
cudnn.allow_tf32 False), as imshard with --tf32 off; tf32: both True (PyTorch's
cuDNN default), as imshard with --tf32 on; bf16: autocast(bfloat16),
the usual mixed-precision recipe (weights and optimiser in fp32). The
model and input are channels_last unless --no-channels-last. Runs W
untimed steps, then N timed steps (more while fewer than S seconds have
passed), synchronising the device before reading the clock, and prints
one line
    model=... size=... batch=... precision=... steps=... seconds=...
    images_per_s=... step_ms=... max_mem_mib=... used_mib=... torch=... gpu=...
max_mem_mib is torch.cuda.max_memory_allocated (tensors only, not the
CUDA context or the caching allocator's reserve); used_mib is the
device's memory in use after the timed steps (torch.cuda.mem_get_info:
total less free, every process, the CUDA context, cuDNN's workspace and
the caching allocator's reserve included), the measure of imshard's
NVML gpu lines (mem_used_mib), so the two compare like for like when
nothing else runs on the GPU.

--profile K then runs K more steps under torch.profiler and prints where
their device time went, in imshard-train --profile's table: each op's
self time on the device, summed by kind (conv, batchnorm, relu, pool,
linear, add, loss, update, convert: autocast's casts; the rest "other"),
forward and backward apart (ops whose names say backward), in ms per
step. --device cpu runs it all on the CPU (self CPU time; for trying the
script where there is no GPU).
Exit status: 0; 1 when torch is missing or sees no GPU; 2 on bad usage.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "train"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, choices=["convnet7", "resnet18", "resnet50"])
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--precision", required=True, choices=["fp32", "tf32", "bf16"])
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=0)
    ap.add_argument("--no-channels-last", action="store_true")
    ap.add_argument("--profile", type=int, default=0, metavar="K")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    a = ap.parse_args()
    try:
        import torch
        from torch import nn
    except ImportError as e:
        print("torch_gpu.py: cannot import torch: %s" % e, file=sys.stderr)
        return 1
    cuda = a.device == "cuda"
    if cuda and not torch.cuda.is_available():
        print("torch_gpu.py: torch %s sees no CUDA GPU" % torch.__version__, file=sys.stderr)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = a.precision == "tf32"
    torch.backends.cudnn.allow_tf32 = a.precision == "tf32"
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(1)
    dev = torch.device(a.device)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    if a.model == "convnet7":
        from torch_step import convnet7
        model = convnet7(nn, a.classes)
    else:
        import torchvision
        model = getattr(torchvision.models, a.model)(num_classes=a.classes)
    fmt = torch.contiguous_format if a.no_channels_last else torch.channels_last
    model = model.to(dev, memory_format=fmt).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(a.batch, 3, a.size, a.size, device=dev).contiguous(memory_format=fmt)
    y = torch.randint(0, a.classes, (a.batch,), device=dev)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(a.device, dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(a.warmup):
        step()
    sync()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    n, t0 = 0, time.perf_counter()
    while True:
        step()
        n += 1
        if n >= a.steps:
            sync()
            if time.perf_counter() - t0 >= a.seconds:
                break
    dt = time.perf_counter() - t0
    used = 0.0
    if cuda:
        free, total = torch.cuda.mem_get_info()
        used = (total - free) / 1048576.0
    print("model=%s size=%d batch=%d precision=%s steps=%d seconds=%.3f images_per_s=%.3f "
          "step_ms=%.3f max_mem_mib=%.1f used_mib=%.1f torch=%s gpu=%s"
          % (a.model, a.size, a.batch, a.precision, n, dt, n * a.batch / dt, 1e3 * dt / n,
             torch.cuda.max_memory_allocated() / 1048576.0 if cuda else 0.0, used,
             torch.__version__,
             torch.cuda.get_device_name().replace(" ", "_") if cuda else "cpu"))
    if a.profile > 0:
        profile(torch, step, sync, a.profile, cuda)
    return 0


# op name fragments -> kind, first match wins (aten names, lower case)
KINDS = [("conv", ("convolution", "conv2d", "cudnn_conv", "implicit_gemm", "wgrad", "dgrad")),
         ("batchnorm", ("batch_norm", "batchnorm")),
         ("relu", ("relu", "threshold")),
         ("pool", ("pool",)),
         ("loss", ("cross_entropy", "log_softmax", "nll_loss", "softmax")),
         ("update", ("sgd", "_foreach", "fused_sgd")),
         ("linear", ("addmm", "linear", "aten::mm", "matmul")),
         ("add", ("aten::add",)),
         ("convert", ("aten::to", "aten::copy_", "_to_copy"))]


def profile(torch, step, sync, k, cuda):
    """K steps under torch.profiler; each aten op's self time
    (device time on a GPU) summed by kind, forward and backward apart."""
    from torch.profiler import ProfilerActivity, profile as prof
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with prof(activities=acts) as p:
        for _ in range(k):
            step()
        sync()
    fw, bw = {}, {}
    for e in p.key_averages():
        us = e.self_device_time_total if cuda else e.self_cpu_time_total
        if us <= 0:
            continue
        name = e.key.lower()
        # a kernel's time is also its launching aten op's self time:
        # count the ops only, or every kernel counts twice
        if not name.startswith("aten::"):
            continue
        kind = next((kd for kd, frags in KINDS if any(f in name for f in frags)), "other")
        side = bw if "backward" in name else fw
        side[kind] = side.get(kind, 0.0) + us / 1000.0 / k
    total = sum(fw.values()) + sum(bw.values()) or 1.0
    print("torch profile of %d steps (ms per step, %s self time by op kind):"
          % (k, "device" if cuda else "CPU"))
    print("  %-10s %9s %9s %6s" % ("piece", "forward", "backward", "share"))
    for kind in [kd for kd, _ in KINDS] + ["other"]:
        f, b = fw.get(kind, 0.0), bw.get(kind, 0.0)
        if f + b > 0:
            print("  %-10s %9.3f %9.3f %5.1f%%" % (kind, f, b, 100 * (f + b) / total))
    print("  %-10s %9.3f" % ("sum", total))
    # the same events by name, for what the kinds above cannot tell apart
    # (which cuDNN kernels ran, whether a layout transpose did)
    print(p.key_averages().table(
        sort_by="self_device_time_total" if cuda else "self_cpu_time_total", row_limit=25))


if __name__ == "__main__":
    sys.exit(main())

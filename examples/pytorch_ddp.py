"""Trains torchvision's resnet18 data-parallel from imshard splits.

    torchrun --nproc_per_node 2 examples/pytorch_ddp.py out/packed/train.json \
        out/packed/val.json --epochs 2 --size 64

One process per rank (torchrun sets RANK/WORLD_SIZE/LOCAL_RANK): gloo on
the CPU, nccl with one GPU per rank (a rank without a GPU of its own is
refused with one line; CUDA_VISIBLE_DEVICES= trains on the CPU). Each rank reads its share through
imshard.torch.Loader (rank and world from torch.distributed); every rank
gets the same number of batches, so DDP's allreduce never waits for a rank
that ran out. Validation counts every record once: padded samples (repeats
that make shares equal) are left out of the metric.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision

import imshard
from imshard.torch import Loader


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("train")
    p.add_argument("val")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32, help="per rank")
    p.add_argument("--size", type=int, default=112)
    p.add_argument("--lr", type=float, default=0.02, help="per rank, scaled by the world size")
    p.add_argument("--threads", type=int, default=1, help="loader threads per rank")
    p.add_argument("--max-steps", type=int, default=0, help="stop each epoch after N steps")
    a = p.parse_args()

    cuda = torch.cuda.is_available()
    local = int(os.environ.get("LOCAL_RANK", 0))
    if cuda and local >= torch.cuda.device_count():
        # said before the process group, which would wait for this rank
        raise SystemExit("pytorch_ddp.py: local rank %d has no GPU of its own (this machine "
                         "shows %d): start at most that many ranks here (--nproc_per_node), "
                         "or hide the GPUs (CUDA_VISIBLE_DEVICES=) to train on the CPU"
                         % (local, torch.cuda.device_count()))
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    torch.set_num_threads(max(1, (os.cpu_count() or 2) // world))

    train = Loader(a.train, a.batch_size, a.size, augment="flip", threads=a.threads, seed=1)
    val = Loader(a.val, a.batch_size, a.size, train=False, threads=a.threads)
    classes = len(imshard.Split(a.train).classes)
    torch.manual_seed(0)  # DDP broadcasts rank 0's weights anyway
    model = torchvision.models.resnet18(num_classes=classes).to(device)
    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if cuda else None)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr * world, momentum=0.9, weight_decay=1e-4)

    for epoch in range(a.epochs):
        train.set_epoch(epoch)
        model.train()
        t0, seen = time.time(), 0
        for step, (images, labels) in enumerate(train):
            images = images.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            loss = F.cross_entropy(model(images), labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            seen += len(labels)
            if a.max_steps and step + 1 >= a.max_steps:
                break
        correct = torch.zeros(2, device=device)
        model.eval()
        with torch.no_grad():
            for b in val.epoch(0):
                images, labels = b
                keep = ~b.padded.to(device)
                pred = model(images.to(device)).argmax(1)
                correct += torch.stack([(pred.eq(labels.to(device)) & keep).sum(), keep.sum()]).float()
        dist.all_reduce(correct)
        if rank == 0:
            print("epoch %d: loss %.3f, %.0f images/s per rank, val top-1 %.3f (%d records)"
                  % (epoch, loss.item(), seen / (time.time() - t0),
                     (correct[0] / correct[1]).item(), int(correct[1].item())), flush=True)
    train.close()
    val.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

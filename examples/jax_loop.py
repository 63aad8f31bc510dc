"""A JAX training loop fed by imshard: softmax regression on the pixels.

    python3 examples/jax_loop.py out/packed/train.json out/packed/val.json --size 32

Batches come from imshard.Loader as NumPy views of the C loader's ring
(NHWC float32, normalised) and go to the device with jax.device_put; the
ring slot is reused only once nothing (the NumPy view, or a JAX array that
aliases it on the CPU) refers to the batch any more. For several hosts,
pass rank=jax.process_index(), world=jax.process_count() to the loaders.
"""
import argparse
import time

import jax
import jax.numpy as jnp

import imshard


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("train")
    p.add_argument("val")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.002)
    a = p.parse_args()

    rank, world = jax.process_index(), jax.process_count()
    train = imshard.Loader(a.train, a.batch_size, a.size, layout="nhwc", rank=rank, world=world)
    val = imshard.Loader(a.val, a.batch_size, a.size, layout="nhwc", train=False, rank=rank,
                         world=world)
    classes = len(imshard.Split(a.train).classes)
    dim = a.size * a.size * 3
    params = {"w": jnp.zeros((dim, classes)), "b": jnp.zeros(classes)}

    def loss_fn(params, x, y):
        logits = x.reshape(x.shape[0], -1) @ params["w"] + params["b"]
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], 1))

    @jax.jit
    def step(params, x, y):
        loss, g = jax.value_and_grad(loss_fn)(params, x, y)
        return jax.tree_util.tree_map(lambda p, g: p - a.lr * g, params, g), loss

    @jax.jit
    def correct(params, x, y, keep):
        pred = jnp.argmax(x.reshape(x.shape[0], -1) @ params["w"] + params["b"], 1)
        return jnp.sum((pred == y) & keep), jnp.sum(keep)

    for epoch in range(a.epochs):
        train.set_epoch(epoch)
        t0, n = time.time(), 0
        for images, labels in train:
            x, y = jax.device_put(images), jax.device_put(labels.astype("int32"))
            params, loss = step(params, x, y)
            # On the CPU, device_put aliases the loader's ring instead of
            # copying, and JAX dispatches steps ahead of their completion:
            # without this wait, queued steps would hold every ring slot
            # and the loader would refuse the next batch. On a GPU the
            # put is a copy and the wait costs one step of overlap.
            loss.block_until_ready()
            n += len(labels)
        right = total = 0
        for b in val.epoch(0):
            c, t = correct(params, jax.device_put(b.images), jax.device_put(b.labels.astype("int32")),
                           jax.device_put(~b.padded))
            right, total = right + int(c), total + int(t)  # int() waits
        print("epoch %d: loss %.3f, %.0f images/s, val top-1 %.3f (%d records)"
              % (epoch, float(loss), n / (time.time() - t0), right / max(total, 1), total), flush=True)
    train.close()
    val.close()


if __name__ == "__main__":
    main()

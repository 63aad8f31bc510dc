"""imshard.torch's CUDA page-locking protocol (in a forked child, at close,
and under copies in flight), with a stand-in torch module that records the
CUDA calls (the real one need not be installed, and no GPU is needed: what
is checked is which process calls cudaHostUnregister, and after what, and
which pixels a copy queued on a stand-in device queue reads)."""
import subprocess
import sys
import textwrap

FAKE_TORCH = """
import os, sys, types
calls = []

class Cudart:
    def cudaHostRegister(self, addr, nbytes, flags):
        calls.append(("register", os.getpid(), addr))
        return 0

    def cudaHostUnregister(self, addr):
        calls.append(("unregister", os.getpid(), addr))
        return 0

class Event:
    # a copy's event that has always passed: the batches held for copies
    # in flight are given back at the next request
    def record(self):
        pass

    def query(self):
        return True

    def synchronize(self):
        pass

torch = types.ModuleType("torch")
torch.cuda = types.SimpleNamespace(is_available=lambda: True, init=lambda: None,
                                   cudart=lambda: Cudart(), Event=Event,
                                   synchronize=lambda *a: calls.append(("synchronize", os.getpid())))
torch.from_numpy = lambda a: a
torch.bfloat16 = "bfloat16"
sys.modules["torch"] = torch
"""


def test_a_forked_child_leaves_the_parents_cuda_registrations(sample, tmp_path):
    # before: close() in a forked child (a fork-started DataLoader worker
    # dropping its copy of the loader) called cudaHostUnregister there,
    # where CUDA, initialised by the parent, cannot be used
    script = tmp_path / "fork.py"
    script.write_text(FAKE_TORCH + textwrap.dedent("""
        from imshard.torch import Loader
        l = Loader(sys.argv[1], 4, 16, rank=0, world=1, threads=1, prefetch=1)
        b = next(iter(l))
        assert l.pinned
        print("registered", len([c for c in calls if c[0] == "register"]), flush=True)
        pid = os.fork()
        if pid == 0:
            del b
            l.close()
            print("child unregistered",
                  len([c for c in calls if c[0] in ("unregister", "synchronize") and
                       c[1] == os.getpid()]),
                  "closed", l.closed, flush=True)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        del b
        l.close()
        print("parent unregistered",
              sorted(c[2] for c in calls if c[0] == "unregister" and c[1] == os.getpid()) ==
              sorted(c[2] for c in calls if c[0] == "register"), "child status", status,
              flush=True)
    """))
    p = subprocess.run([sys.executable, str(script), sample["train"]], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 3 and lines[0] != "registered 0", p.stdout + p.stderr
    assert lines[1:] == ["child unregistered 0 closed True",
                         "parent unregistered True child status 0"], p.stdout + p.stderr


def test_pinned_answers_in_a_forked_child(sample, tmp_path):
    # before: loader.pinned asked the C loader's stats, which raise
    # imshard.Error in a forked child; the child has no CUDA context, so
    # its copies of the batches are not page-locked: False
    script = tmp_path / "pinned.py"
    script.write_text(FAKE_TORCH + textwrap.dedent("""
        from imshard.torch import Loader
        l = Loader(sys.argv[1], 4, 16, rank=0, world=1, threads=1, prefetch=1)
        b = next(iter(l))
        print("parent", l.pinned, flush=True)
        pid = os.fork()
        if pid == 0:
            try:
                print("child", l.pinned, flush=True)
            except Exception as e:
                print("child raised", type(e).__name__, e, flush=True)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        del b
        l.close()
        print("closed", l.pinned, "child status", status, flush=True)
    """))
    p = subprocess.run([sys.executable, str(script), sample["train"]], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["parent True", "child False",
                                     "closed False child status 0"], p.stdout + p.stderr


def test_close_waits_for_copies_before_unpinning(sample, tmp_path):
    # a .cuda(non_blocking=True) of the last batch may still read the ring
    # when close() unpins it: the device is synchronised first (before:
    # unregistered under a copy in flight)
    script = tmp_path / "sync.py"
    script.write_text(FAKE_TORCH + textwrap.dedent("""
        from imshard.torch import Loader
        l = Loader(sys.argv[1], 4, 16, rank=0, world=1, threads=1, prefetch=1)
        for b in l:
            pass
        del b
        l.close()
        kinds = [c[0] for c in calls if c[0] != "register"]
        print(kinds[0], len(kinds) > 1 and set(kinds[1:]) == {"unregister"}, flush=True)
    """))
    p = subprocess.run([sys.executable, str(script), sample["train"]], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["synchronize True"], p.stdout + p.stderr


# A device queue that runs nothing until an event or synchronize asks for
# it: the copies read the ring's memory at that time, by address (as the
# device's DMA would), holding no reference to the batch
DEVICE_QUEUE = """
import ctypes
queue, done = [], [0]

def run_to(pos):
    while done[0] < pos:
        queue[done[0]]()
        done[0] += 1

class QueuedEvent:
    def record(self):
        self.pos = len(queue)

    def query(self):
        return done[0] >= self.pos

    def synchronize(self):
        run_to(self.pos)

torch.cuda.Event = QueuedEvent
torch.cuda.synchronize = lambda *a: run_to(len(queue))

def copy_non_blocking(a):
    out, addr, n, shape, dtype = {}, a.ctypes.data, a.nbytes, a.shape, a.dtype
    def run():
        out["pixels"] = np.frombuffer(ctypes.string_at(addr, n), dtype).reshape(shape)
    queue.append(run)
    return out
"""


def test_a_copy_in_flight_reads_its_own_batch(sample, tmp_path):
    # the device on the CUDA test's (test_torch_cuda.py) side, on the CPU:
    # a loop that queues each batch's copy and drops its view at once.
    # Before, the slot went back to the loader's threads with the view
    # and the copies read later batches (held for the copy since, the slot
    # came back before the wait: popped from the queue of copies first)
    script = tmp_path / "inflight.py"
    script.write_text(FAKE_TORCH + DEVICE_QUEUE + textwrap.dedent("""
        import numpy as np
        import imshard
        from imshard.torch import Loader
        kw = dict(rank=0, world=1, seed=7, augment=None, threads=2)
        ref = imshard.Loader(sys.argv[1], 8, 32, copy=True, **kw)
        want = [b[0] for e in range(4) for b in ref.epoch(e)]
        ref.close()
        for prefetch in (1, 3):
            l = Loader(sys.argv[1], 8, 32, prefetch=prefetch, **kw)
            got = []
            for e in range(4):
                for images, labels in l.epoch(e):
                    images = copy_non_blocking(images)
                    got.append(images)
            torch.cuda.synchronize()
            bad = [i for i, (g, w) in enumerate(zip(got, want))
                   if not np.array_equal(g["pixels"], w)]
            print("prefetch", prefetch, len(got) == len(want), bad, flush=True)
            l.close()
    """))
    p = subprocess.run([sys.executable, str(script), sample["train"]], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["prefetch 1 True []", "prefetch 3 True []"], \
        p.stdout + p.stderr

#!/usr/bin/env python3
"""Where a ResNet-50 training step's time goes when stokehold feeds it (a diagnostic, not a
benchmark): per step, the host time to fetch a batch, to enqueue forward/backward/step, and
the GPU time of the step (CUDA events on torch's stream), for several ways of feeding:

  synthetic   a batch already on the GPU
  sk          stokehold batches (torch.from_dlpack), trained on
  sk-bg       stokehold batches fetched and dropped, the model trained on a synthetic batch:
              shows what the pipeline's mere running costs the trainer (GPU sharing, host
              blocking), apart from the data dependency
  sk-cpu      stokehold CPU path, .pin_memory().cuda() in Python

  train_breakdown.py DATA PIPELINE [--steps N] [--warmup N] [--batch B] [--modes a,b,..]
                                   [--profile MODE]
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torchvision


def loader(mode, a):
    if mode in ("synthetic",):
        x = torch.randn(a.batch, 3, 224, 224, device="cuda").half()
        y = torch.randint(0, 1000, (a.batch,), device="cuda")
        while True:
            yield x, y, 0.0
    import stokehold

    device = "cpu" if mode == "sk-cpu" else "gpu"
    p = stokehold.Pipeline(a.pipeline, a.data, device=device, batch=a.batch, epochs=1000)
    synth = torch.randn(a.batch, 3, 224, 224, device="cuda").half()
    ys = torch.randint(0, 1000, (a.batch,), device="cuda")
    it = iter(p)
    while True:
        t0 = time.perf_counter()
        try:
            b = next(it)
        except StopIteration:
            it = iter(p)
            b = next(it)
        x = torch.from_dlpack(b["images"])
        if device == "cpu":
            x = x.pin_memory().cuda(non_blocking=True)
        t = time.perf_counter() - t0
        if mode == "sk-bg":
            del x, b
            yield synth, ys, t
        else:
            yield x, ys[: x.shape[0]], t


def run(mode, a, prof=None):
    torch.backends.cudnn.benchmark = True
    model = torchvision.models.resnet50().cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    crit = torch.nn.CrossEntropyLoss()
    gen = loader(mode, a)
    fetch, enqueue, gpu, wall = [], [], [], []
    events = []
    t_start = None
    for i in range(a.warmup + a.steps):
        if i == a.warmup:
            torch.cuda.synchronize()
            t_start = time.perf_counter()
            if prof:
                prof.start()
        ts = time.perf_counter()
        x, y, tf = next(gen)
        t1 = time.perf_counter()
        e0 = torch.cuda.Event(enable_timing=True)
        e1 = torch.cuda.Event(enable_timing=True)
        e0.record()
        x = x.contiguous(memory_format=torch.channels_last)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = crit(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        e1.record()
        t2 = time.perf_counter()
        if i >= a.warmup:
            fetch.append(t1 - ts)
            enqueue.append(t2 - t1)
            events.append((e0, e1))
            wall.append(t2 - ts)
    torch.cuda.synchronize()
    total = time.perf_counter() - t_start
    if prof:
        prof.stop()
    gpu = [s.elapsed_time(e) / 1e3 for s, e in events]
    med = lambda v: 1e3 * statistics.median(v)
    p90 = lambda v: 1e3 * sorted(v)[int(0.9 * (len(v) - 1))]
    print(
        f"mode={mode:9s} img/s={a.steps * a.batch / total:7.0f} step={1e3 * total / a.steps:6.1f}ms "
        f"fetch med/p90={med(fetch):6.1f}/{p90(fetch):6.1f}ms enqueue med/p90={med(enqueue):6.1f}/{p90(enqueue):6.1f}ms "
        f"gpu(step events) med/p90={med(gpu):6.1f}/{p90(gpu):6.1f}ms",
        flush=True,
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("pipeline")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=6)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--modes", default="synthetic,sk,sk-bg,sk-cpu")
    ap.add_argument("--profile", default=None)
    ap.add_argument("--trace", default=None)
    a = ap.parse_args()
    mode = os.environ.get("TB_MODE")
    if mode:  # one mode per process: a fresh CUDA context and pipeline each
        prof = None
        if a.profile == mode:
            from torch.profiler import ProfilerActivity, profile

            prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
        run(mode, a, prof)
        if prof:
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=22), flush=True)
            print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=12), flush=True)
            if a.trace:
                prof.export_chrome_trace(a.trace)
        os._exit(0)
    import subprocess

    for m in a.modes.split(","):
        subprocess.run([sys.executable] + sys.argv, env={**os.environ, "TB_MODE": m}, timeout=240)


if __name__ == "__main__":
    main()

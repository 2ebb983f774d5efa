#!/usr/bin/env python3
"""The Python loop over a stokehold pipeline, timed the way `stokehold bench` times the Rust
loop: one warm-up epoch, then --epochs timed epochs, each batch's images taken by
torch.from_dlpack (numpy.from_dlpack where torch is missing). Prints, last:

  peer=stokehold-python device=cpu threads=N batch=B images=I seconds=S throughput=T img/s
"""
import argparse
import time
from pathlib import Path

import stokehold

try:
    from torch import from_dlpack
    TAKE = "torch.from_dlpack"
except ImportError:
    from numpy import from_dlpack
    TAKE = "numpy.from_dlpack"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pipeline", type=Path,
                    default=Path(__file__).resolve().parents[1] / "pipelines" / "resnet50-train.toml")
    ap.add_argument("--data", required=True)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=3, help="timed epochs after the warm-up")
    args = ap.parse_args()
    p = stokehold.Pipeline(args.pipeline, args.data, device="cpu", threads=args.threads,
                           batch=args.batch, epochs=args.epochs + 1)
    for b in p:  # warm-up epoch: the clock starts after its last batch
        from_dlpack(b["images"])
    t0, images = time.perf_counter(), 0
    for _ in range(args.epochs):
        for b in p:
            from_dlpack(b["images"])
            images += len(b) - b.padded
    seconds = time.perf_counter() - t0
    print(f"(each batch taken with {TAKE})")
    print(f"peer=stokehold-python device=cpu threads={p.threads} batch={args.batch} "
          f"images={images} seconds={seconds:.3f} throughput={images / max(seconds, 1e-9):.1f} img/s")


if __name__ == "__main__":
    main()

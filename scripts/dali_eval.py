#!/usr/bin/env python3
"""The ResNet-50 evaluation input pipeline in NVIDIA DALI's CPU mode, for side-by-side runs
with `stokehold bench pipelines/resnet50-eval.toml` (same fields in the last line).

Pipeline: read (no shuffle) -> decode -> resize shorter side to 256 (antialias)
-> center crop 224 -> normalize (ImageNet mean/std) -> float32 CHW.
"""
import argparse
import os
import sys
import time

MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=3)
    args = ap.parse_args()
    files = sorted(os.path.join(args.data, f) for f in os.listdir(args.data)
                   if f.lower().endswith((".jpg", ".jpeg")))
    if not files:
        sys.exit(f"no JPEG files in {args.data}")

    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=args.batch, num_threads=args.threads, device_id=None, seed=1,
                  prefetch_queue_depth=2)
    def pipe():
        jpegs, labels = fn.readers.file(files=files, labels=list(range(len(files))),
                                        random_shuffle=False, name="Reader")
        images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
        images = fn.resize(images, resize_shorter=256, antialias=True)
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                          crop=(224, 224), mean=MEAN, std=STD)
        return images, labels

    p = pipe()
    p.build()
    per_epoch = (len(files) + args.batch - 1) // args.batch

    def epoch():
        return sum(len(p.run()[0]) for _ in range(per_epoch))

    epoch()
    start = time.perf_counter()
    images = sum(epoch() for _ in range(args.epochs))
    seconds = time.perf_counter() - start
    print(f"peer=dali-eval device=cpu threads={args.threads} batch={args.batch} "
          f"images={images} seconds={seconds:.3f} throughput={images / seconds:.1f} img/s")


if __name__ == "__main__":
    main()

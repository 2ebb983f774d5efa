#!/usr/bin/env python3
"""NVIDIA DALI's ResNet-50 train pipeline with a chosen chroma upsampling: how much DALI's
figure depends on it, beside `stokehold bench` with `upsampling = "nearest"` / `"fancy"`.

  dali_upsampling.py DATA --upsampling nearest|fancy [--batch 256] [--epochs 10]
                     [--threads N] [--hw-load F] [--device gpu|cpu]

The recipe of pipelines/resnet50-train.toml as DALI writes it (the one of
../shared/peers/rn50_train.py and dali_hw.py): file reader (shuffled), ROI decode with a random
crop (area 0.08-1, aspect 3/4-4/3) by the "mixed" decoder, resize to 224x224 (antialias),
horizontal flip p=0.5, normalize (ImageNet mean/std), float16 CHW. `--upsampling` sets the
decoder's jpeg_fancy_upsampling: False for "nearest" (DALI's default: chroma repeated, as the
JPEG engines write it), True for "fancy" (libjpeg's interpolation, as Pillow and stokehold's
default). `--device cpu` (float32, DALI's CPU-only mode) is for trying the script on a machine
without a GPU; `--hw-load` is the decoder's hw_decoder_load (default: DALI's own).

One untimed epoch first, then `--epochs` timed; prints one line whose last fields are those
`stokehold bench` ends with:
  peer=dali device=gpu upsampling=nearest jpeg_fancy_upsampling=False threads=16 batch=256
    images=… seconds=… throughput=… img/s
"""
import argparse
import os
import sys
import time

EXTENSIONS = (".jpg", ".jpeg")
MEAN = [123.675, 116.28, 103.53]
STD = [58.395, 57.12, 57.375]


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data", help="a folder of JPEGs (flat, or class sub-folders)")
    ap.add_argument("--upsampling", choices=["nearest", "fancy"], required=True,
                    help="nearest: jpeg_fancy_upsampling=False (DALI's default); fancy: True")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=10, help="timed epochs, after an untimed one")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="DALI's CPU threads (default: a core each)")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--hw-load", type=float, help="hw_decoder_load: the share of images for the JPEG engines")
    ap.add_argument("--device", choices=["gpu", "cpu"], default="gpu")
    return ap.parse_args(argv)


def jpeg_files(root):
    found = []
    for folder, dirs, names in os.walk(root):
        dirs.sort()
        found += [os.path.join(folder, n) for n in sorted(names) if n.lower().endswith(EXTENSIONS)]
    return found


def build(a, files):
    from nvidia.dali import fn, pipeline_def, types
    gpu = a.device == "gpu"
    decoder = {"jpeg_fancy_upsampling": a.upsampling == "fancy"}
    if a.hw_load is not None:
        decoder["hw_decoder_load"] = a.hw_load

    @pipeline_def(batch_size=a.batch, num_threads=a.threads, device_id=0 if gpu else None, seed=1,
                  prefetch_queue_depth=2)
    def train():
        encoded, labels = fn.readers.file(files=files, random_shuffle=True, seed=1, name="Reader")
        images = fn.decoders.image_random_crop(encoded, device="mixed" if gpu else "cpu", output_type=types.RGB,
                                               random_area=[0.08, 1.0], random_aspect_ratio=[3 / 4, 4 / 3],
                                               **decoder)
        images = fn.resize(images, resize_x=a.size, resize_y=a.size, antialias=True)
        flip = fn.random.coin_flip(probability=0.5)
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT16 if gpu else types.FLOAT, output_layout="CHW",
                                          mean=MEAN, std=STD, mirror=flip)
        return images, labels

    p = train()
    p.build()
    return p


def main():
    a = parse_args()
    files = jpeg_files(a.data)
    if len(files) < a.batch:
        sys.exit(f"{len(files)} JPEGs under {a.data}: fewer than a batch of {a.batch}")
    p = build(a, files)
    per_epoch = -(-len(files) // a.batch)
    for _ in range(per_epoch):  # the untimed epoch: the decoders' and allocators' warm-up
        p.run()
    images = 0
    t0 = time.perf_counter()
    for _ in range(a.epochs * per_epoch):
        out, _labels = p.run()
        images += len(out)
    seconds = time.perf_counter() - t0
    print(f"peer=dali device={a.device} upsampling={a.upsampling} jpeg_fancy_upsampling={a.upsampling == 'fancy'} "
          f"threads={a.threads} batch={a.batch} images={images} seconds={seconds:.3f} "
          f"throughput={images / seconds:.1f} img/s", flush=True)
    # DALI's threads need not be joined: the figure is out.
    os._exit(0)


if __name__ == "__main__":
    main()

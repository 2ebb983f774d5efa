#!/usr/bin/env python3
"""The training loop users run, fed by each loader in turn: how fast it trains.

  bench_training.py [--data DIR] [--repeat N] [--loaders synthetic,stokehold-gpu,...]
                    [--batch B] [--steps N] [--warmup N] [--threads N] [--workers N]
                    [--mode auto|gpu|cpu] [--upsampling fancy|nearest] [--consumer-busy-ms MS]
                    [--train-stream default|side]

On a GPU (mode gpu): torchvision's ResNet-50, bf16 autocast, channels_last, SGD, cuDNN
autotuning on, batch 256 of 224x224 float16 images, fed by
  synthetic      one batch already on the GPU, used again every step: the loop's own speed
  stokehold-gpu  stokehold's GPU path (device="gpu"), torch.from_dlpack, no copy
  stokehold-gpu-copy  the same, each batch copied at once into memory PyTorch allocates
                 (on its stream) and stokehold's buffer handed back, as DALI's PyTorch
                 iterator does (on a GPU only, unless named in --loaders)
  stokehold-cpu  stokehold's CPU path handing out batches already on the GPU
                 (batch_memory="cuda": uploaded by the pipeline from pinned memory, no copy
                 in Python)
  stokehold-cpu-pycopy  the CPU path's host batches, copied here (pin_memory, then
                 non-blocking .to("cuda")): what a user did before batch_memory (on a GPU
                 only, unless named in --loaders)
  stokehold-cpu-pinned  the CPU path's host batches already in pinned memory
                 (batch_memory="pinned"), copied here with .cuda(non_blocking=True): an
                 asynchronous copy, no pin_memory()
  dali           NVIDIA DALI's GPU pipeline (mixed decoder), where nvidia.dali is importable
  dataloader     PyTorch's DataLoader (torchvision transforms on PIL images; a worker per
                 core, pin_memory, persistent_workers)
Every loader runs the same recipe (pipelines/resnet50-train.toml: random resized crop,
flip, normalize) on the same list of files and drops each epoch's last, smaller batch, so
every step has the same input shape (a new shape makes cuDNN tune again, which a loop
that saw it once would pay for in its timed steps). Each loader runs in a process of its own
(a fresh CUDA context); the warm-up steps span an epoch boundary.

Chroma (--upsampling): how subsampled JPEGs' chroma is brought to full size, the same for
every loader that can choose. "fancy" (the default) is libjpeg's interpolation, as Pillow and
torchvision decode; "nearest" repeats each chroma sample over its block (libjpeg's -nosmooth),
what the GPU's JPEG engines write natively and what DALI's GPU ("mixed") decoder outputs by
default. It sets the decode op's `upsampling` in every stokehold loader's pipeline and DALI's
`jpeg_fancy_upsampling` (True for fancy, False for nearest); the DataLoader (torchvision on
Pillow) always decodes fancy, and so does DALI's CPU mode (its CPU decoder ignores
jpeg_fancy_upsampling), which the header line says. On stokehold's GPU path "nearest"
costs about a third of the host time per image of "fancy" (docs/gpu.md, Chroma): compare
with DALI's GPU figures like for like with --upsampling nearest.

Without a GPU (mode cpu, what CI runs) the same loop trains a tiny network on 64x64 float32
images for a few steps, stokehold-gpu runs on the emulated device (the GPU path's
bookkeeping on the CPU), stokehold-cpu-pinned on the emulated device's pinned memory
(batch_memory="emu-pinned"), and DALI on its CPU mode. With --consumer-busy-ms the step is a
fixed amount of Python computation instead, and each loader is followed by how much it
slowed that consumer: its steps against the same steps on batches already made, timed in
the same process just before the loader started.

Prints one line per loader, then a table:
  loader=NAME batch=B steps=N throughput=T img/s of_synthetic=P% loader_wait=W ms/step
    gpu_busy=G% peak_mem=M
loader_wait: host time the loop spent getting the next batch (copies to the GPU included);
gpu_busy: CUDA-event time of the training steps over wall time (cpu mode: wall time in the
step); peak_mem: peak device memory (cpu mode: the process's peak resident memory).
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOADERS = ["synthetic", "stokehold-gpu", "stokehold-gpu-copy", "stokehold-cpu", "stokehold-cpu-pycopy",
           "stokehold-cpu-pinned", "dali", "dataloader"]
# Without a GPU stokehold-cpu and stokehold-cpu-pycopy are the same (host batches, no copy): one
# is run; stokehold-cpu-pinned runs with the emulated device's pinned memory. The copy of the
# GPU path's batches is a host copy there, which measures nothing of a device's.
CPU_MODE_LOADERS = [n for n in LOADERS if n not in ("stokehold-cpu-pycopy", "stokehold-gpu-copy")]
MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
EXTENSIONS = (".jpg", ".jpeg", ".png")
RESULT = "RESULT "
# The decode op's `upsampling` choices (the first is its default); DALI's jpeg_fancy_upsampling
# is True for "fancy". Pillow, and so the DataLoader, always decodes fancy; so does DALI's CPU
# decoder, whatever jpeg_fancy_upsampling says (DALI 2.4: the same pixels as Pillow either way).
UPSAMPLING = ["fancy", "nearest"]


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, help="an image folder (class sub-folders, or flat); default: stokehold's built-in demo images")
    ap.add_argument("--repeat", type=int, default=1, help="list every file this many times (longer epochs from a small folder)")
    ap.add_argument("--loaders", default=None,
                    help=f"comma-separated, of {','.join(LOADERS)} (default: all; without a GPU all but "
                         f"stokehold-cpu-pycopy)")
    ap.add_argument("--mode", choices=["auto", "gpu", "cpu"], default="auto", help="auto: gpu where torch sees CUDA")
    ap.add_argument("--batch", type=int, help="default: 256 (gpu), 8 (cpu)")
    ap.add_argument("--steps", type=int, help="timed steps; default: 100 (gpu), 6 (cpu)")
    ap.add_argument("--warmup", type=int, help="warm-up steps at least; raised to span an epoch boundary; default: 10 (gpu), 2 (cpu)")
    ap.add_argument("--size", type=int, help="image side; default: 224 (gpu), 64 (cpu)")
    ap.add_argument("--upsampling", choices=UPSAMPLING, default="fancy",
                    help="chroma upsampling of subsampled JPEGs for stokehold (the decode op's upsampling) and DALI "
                         "(jpeg_fancy_upsampling): fancy (libjpeg's interpolation, as Pillow) or nearest (chroma "
                         "repeated, as the GPU's JPEG engines and DALI's GPU decoder by default); the DataLoader "
                         "(Pillow) always decodes fancy")
    ap.add_argument("--threads", type=int, help="stokehold's worker threads (default: its own: every core on the CPU path, half of them on the GPU path with JPEG engines)")
    ap.add_argument("--workers", type=int, default=os.cpu_count(), help="DataLoader workers and DALI threads (default: a core each)")
    ap.add_argument("--prefetch", type=int, help="stokehold's prefetch (default: its own)")
    ap.add_argument("--torch-threads", type=int, help="torch.set_num_threads in each loader's process (default: torch's own)")
    ap.add_argument("--consumer-busy-ms", type=float, help="cpu mode: the step is this much fixed Python computation instead of training")
    ap.add_argument("--train-stream", choices=["default", "side"], default="default",
                    help="gpu mode: the stream the loop trains on: PyTorch's default (the legacy default stream, "
                         "which synchronises with every blocking stream) or a side stream of its own "
                         "(torch.cuda.set_stream(torch.cuda.Stream())); every loader hands its batches to that stream")
    ap.add_argument("--child", choices=LOADERS, help=argparse.SUPPRESS)
    ap.add_argument("--list", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    return a


def settle_mode(a):
    """Fills in the mode's defaults."""
    if a.mode == "auto":
        try:
            import torch
            a.mode = "gpu" if torch.cuda.is_available() else "cpu"
        except ImportError:
            a.mode = "cpu"
    gpu = a.mode == "gpu"
    if a.consumer_busy_ms is not None and gpu:
        sys.exit("--consumer-busy-ms is for the cpu mode (it replaces the training step)")
    if a.train_stream != "default" and not gpu:
        sys.exit("--train-stream is for the gpu mode")
    a.batch = a.batch or (256 if gpu else 8)
    a.steps = a.steps or (100 if gpu else 6)
    a.warmup = a.warmup if a.warmup is not None else (10 if gpu else 2)
    a.size = a.size or (224 if gpu else 64)
    return a


# ---------------------------------------------------------------------------------- data

def list_files(root: Path):
    """(absolute path, label) of every image under `root`: sub-folders are classes (sorted,
    as torchvision's ImageFolder numbers them); a flat folder's files get labels 0..999 in
    turn. (stokehold reads a list file's relative paths from the list's own folder.)"""
    root = root.resolve()
    classes = sorted(d.name for d in root.iterdir() if d.is_dir() and not d.name.startswith("."))
    if classes:
        pairs = [(str(p), i) for i, c in enumerate(classes) for p in sorted((root / c).rglob("*"))
                 if p.suffix.lower() in EXTENSIONS]
    else:
        files = sorted(p for p in root.iterdir() if p.suffix.lower() in EXTENSIONS)
        pairs = [(str(p), i % 1000) for i, p in enumerate(files)]
    if not pairs:
        sys.exit(f"no images ({', '.join(EXTENSIONS)}) under {root}")
    return pairs


def write_list(pairs, path: Path):
    path.write_text("".join(f"{p} {label}\n" for p, label in pairs))


def read_list(path: Path):
    pairs = []
    for line in path.read_text().splitlines():
        p, label = line.rsplit(" ", 1)
        pairs.append((p, int(label)))
    return pairs


# ------------------------------------------------------------------------------- loaders
# Each loader is a generator of (images, labels) on the training device: images float16
# (gpu) or float32 (cpu) NCHW of a.size, labels int64.

def stokehold_spec(a, dtype):
    """The shipped training pipeline (pipelines/resnet50-train.toml), with the last partial
    batch dropped, the bench's image size and dtype, and its chroma upsampling."""
    return {
        "pipeline": {"batch": a.batch, "seed": 1, "on_error": "skip", "outputs": ["images", "labels"]},
        "op": [
            {"kind": "file_reader", "outputs": ["jpegs", "labels"], "shuffle": True, "last_batch": "drop"},
            {"kind": "decode", "input": "jpegs", "output": "decoded", "upsampling": a.upsampling},
            {"kind": "random_resized_crop", "input": "decoded", "output": "cropped", "size": a.size,
             "scale": [0.08, 1.0], "ratio": [3 / 4, 4 / 3], "interp": "bilinear", "antialias": True},
            {"kind": "flip", "input": "cropped", "output": "flipped", "horizontal": 0.5},
            {"kind": "normalize", "input": "flipped", "output": "normalized",
             "mean": [m * 255 for m in MEAN], "std": [s * 255 for s in STD], "dtype": dtype},
            {"kind": "layout", "input": "normalized", "output": "images", "layout": "CHW"},
        ],
    }


def stokehold_batches(a, device, copy="upload"):
    """stokehold's batches on the training device: the GPU path's, as they are or copied into
    memory PyTorch allocates (copy "torch"); or the CPU path's, uploaded by the pipeline (copy
    "upload", on a GPU: batch_memory="cuda"), or copied here: from ordinary memory pinned
    first ("pycopy"), or from pinned memory ("pinned": batch_memory="pinned"; without a GPU
    the emulated device's, "emu-pinned")."""
    import stokehold
    import torch
    gpu = a.mode == "gpu"
    options = {}
    if device == "cpu" and gpu and copy == "upload":
        options["batch_memory"] = "cuda"
    if device == "cpu" and copy == "pinned":
        options["batch_memory"] = "pinned" if gpu else "emu-pinned"
    if device == "gpu" and not gpu:
        device = "emu"  # the GPU path's bookkeeping, on the CPU
    if a.threads is not None:
        options["threads"] = a.threads
    if a.prefetch is not None:
        options["prefetch"] = a.prefetch
    p = stokehold.Pipeline(stokehold_spec(a, "f16" if gpu else "f32"), a.list, device=device, batch=a.batch, **options)
    a.pipeline = p  # for its stats at the end
    a.describe = f"device={p.device} threads={p.threads}" + (
        f" batch_memory={options['batch_memory']}" if "batch_memory" in options else "") + (
        " copied into PyTorch's memory" if copy == "torch" else "")
    target = torch.device("cuda" if gpu else "cpu")
    while True:
        for b in p:
            x = torch.from_dlpack(b["images"])
            if copy == "torch":
                # A device-to-device copy on PyTorch's stream (after the batch's ready event,
                # which from_dlpack made that stream wait for); dropping the batch then hands
                # its buffer back to the pipeline at once, not when the step is done with it.
                x = x.clone()
                y = torch.from_dlpack(b["labels"]).to(target, non_blocking=True)
                b = None
                yield x, y
                continue
            if x.device.type != target.type:
                # Pinned batches need no pin_memory(): the copy is asynchronous as it is, on
                # the default stream, which the pipeline waits for before it reuses the memory;
                # a copy on a stream of the loop's own must be named (record_stream).
                if not b["images"].pinned:
                    x = x.pin_memory()
                elif a.train_stream == "side":
                    b["images"].record_stream(torch.cuda.current_stream())
                x = x.to(target, non_blocking=True)
            y = torch.from_dlpack(b["labels"]).to(target, non_blocking=True)
            yield x, y


def dali_batches(a):
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali.plugin.base_iterator import LastBatchPolicy
    from nvidia.dali.plugin.pytorch import DALIGenericIterator
    gpu = a.mode == "gpu"
    files, labels = zip(*read_list(a.list))

    @pipeline_def(batch_size=a.batch, num_threads=a.workers, device_id=0 if gpu else None, seed=1, prefetch_queue_depth=2)
    def pipe():
        jpegs, y = fn.readers.file(files=list(files), labels=list(labels), random_shuffle=True, seed=1, name="Reader")
        # jpeg_fancy_upsampling=False (DALI's default) is chroma repeated, as the engines write it.
        images = fn.decoders.image_random_crop(jpegs, device="mixed" if gpu else "cpu", output_type=types.RGB,
                                               random_area=[0.08, 1.0], random_aspect_ratio=[3 / 4, 4 / 3],
                                               jpeg_fancy_upsampling=a.upsampling == "fancy")
        images = fn.resize(images, resize_x=a.size, resize_y=a.size, antialias=True)
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT16 if gpu else types.FLOAT, output_layout="CHW",
                                          mean=[m * 255 for m in MEAN], std=[s * 255 for s in STD],
                                          mirror=fn.random.coin_flip(probability=0.5))
        return images, (y.gpu() if gpu else y)

    it = DALIGenericIterator([pipe()], ["x", "y"], reader_name="Reader", auto_reset=True,
                             last_batch_policy=LastBatchPolicy.DROP)
    a.describe = f"threads={a.workers}"
    while True:
        for d in it:
            yield d[0]["x"], d[0]["y"].view(-1).long()


def dataloader_batches(a):
    import torch
    import torchvision.transforms as T
    from PIL import Image
    from torch.utils.data import DataLoader, Dataset
    gpu = a.mode == "gpu"
    pairs = read_list(a.list)
    tf = T.Compose([T.RandomResizedCrop(a.size, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), antialias=True),
                    T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)])

    class Files(Dataset):
        def __len__(self):
            return len(pairs)

        def __getitem__(self, i):
            path, label = pairs[i]
            with Image.open(path) as im:
                return tf(im.convert("RGB")), label

    torch.manual_seed(1)
    loader = DataLoader(Files(), batch_size=a.batch, shuffle=True, num_workers=a.workers, pin_memory=gpu,
                        persistent_workers=a.workers > 0, prefetch_factor=2 if a.workers > 0 else None,
                        drop_last=True)
    a.describe = f"workers={a.workers}"
    while True:
        for x, y in loader:
            if gpu:
                x = x.cuda(non_blocking=True).half()
                y = y.cuda(non_blocking=True)
            yield x, y


def synthetic_batches(a):
    import torch
    gpu = a.mode == "gpu"
    device = "cuda" if gpu else "cpu"
    classes = 1000 if gpu else a.classes
    g = torch.Generator().manual_seed(1)
    # A few batches made before the loop, handed out in turn: no loader runs beside it.
    made = [(torch.randn(a.batch, 3, a.size, a.size, generator=g).to(device, torch.float16 if gpu else torch.float32),
             torch.randint(0, classes, (a.batch,), generator=g).to(device)) for _ in range(4)]
    a.describe = "batches made before the loop"
    i = 0
    while True:
        yield made[i % len(made)]
        i += 1


# ---------------------------------------------------------------------------- the loop

def tiny_model(classes):
    import torch.nn as nn
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, classes))


class BusyWork:
    """A fixed amount of Python computation (rounds of an integer hash, each on the last
    one's result), calibrated on an idle core before any loader starts: it takes longer
    exactly when something takes the core from it, where a timed spin would not."""

    def __init__(self, ms):
        probe = 20000
        fastest = min(self._timed(probe) for _ in range(10))
        self.rounds = int(round(ms / 1000 / (fastest / probe)))

    @staticmethod
    def _spin(rounds):
        x = 0x9E3779B97F4A7C15
        for _ in range(rounds):
            x = (x * 0x2545F4914F6CDD1D + 1) & 0xFFFFFFFFFFFFFFFF
            x ^= x >> 29
        return x

    def _timed(self, rounds):
        t0 = time.perf_counter()
        self._spin(rounds)
        return time.perf_counter() - t0

    def __call__(self):
        return self._spin(self.rounds)


def pipeline_threads():
    """CPU seconds and wake-ups (voluntary context switches) of this process's stokehold
    threads so far (Linux; zeros elsewhere)."""
    cpu, wakeups = 0.0, 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return cpu, wakeups
    for tid in tasks:
        try:
            base = f"/proc/self/task/{tid}/"
            if not open(base + "comm").read().startswith("stokehold-"):
                continue
            cpu += int(open(base + "schedstat").read().split()[0]) / 1e9
            for line in open(base + "status"):
                if line.startswith("voluntary_ctxt_switches:"):
                    wakeups += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
    return cpu, wakeups


def premade_steps(busy, steps):
    """Seconds for `steps` busy steps on batches already made (taken in turn, as a loop
    would)."""
    import torch
    made = [torch.zeros(1) for _ in range(4)]
    t0 = time.perf_counter()
    for i in range(steps):
        _ = made[i % len(made)]
        busy()
    return time.perf_counter() - t0


def pipeline_summary(p):
    """A stokehold pipeline's own view of the run (its GPU stage's, where it has one): why a
    loader wait happened shows here, not in the loop's timings."""
    if p is None:
        return None
    gpu = p.stats().get("gpu")
    if not gpu or "decoders" not in gpu:
        return None
    split = gpu["decoders"]
    return {"batches_in_flight": gpu["batches_in_flight"], "decode_area_waits": gpu["decode_area_waits"],
            "allocations_after_warm_up": gpu["allocations_after_warm_up"],
            "allocations_by_kind": gpu.get("allocations_after_warm_up_by_kind"),
            "cpu_share": split["cpu_share"], "cpu_share_ceiling": split.get("cpu_share_ceiling"),
            "estimates_capped": split.get("estimates_capped"), "over_budget": split.get("over_budget"),
            "feed": split.get("feed")}


def peak_host_memory_gib():
    import resource
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def child(a):
    """Runs the loop fed by one loader; prints its figures as one JSON line."""
    import torch
    gpu = a.mode == "gpu"
    pairs = read_list(a.list)
    a.classes = max(label for _, label in pairs) + 1
    per_epoch = len(pairs) // a.batch
    if per_epoch < 1:
        sys.exit(f"{len(pairs)} files make no whole batch of {a.batch}: use --repeat or a smaller --batch")
    # At least one epoch boundary falls in the warm-up: its cost (and a loader's first
    # epoch) is not in the timed steps.
    warmup = max(a.warmup, per_epoch + 1)
    device = torch.device("cuda" if gpu else "cpu")
    if a.train_stream == "side":
        # Everything this process queues from here on (the model's copy, the steps, the
        # loaders' hand-over through from_dlpack) goes to this stream.
        torch.cuda.set_stream(torch.cuda.Stream())
    if a.torch_threads is not None:
        torch.set_num_threads(a.torch_threads)
    busy = alone = None
    if a.consumer_busy_ms is not None:
        # Calibrated, then timed on batches already made, before the loader starts: the
        # consumer's speed with nothing beside it, measured in this process just before.
        busy = BusyWork(a.consumer_busy_ms)
        alone = premade_steps(busy, a.steps)
    if gpu:
        import torchvision
        torch.backends.cudnn.benchmark = True
        model = torchvision.models.resnet50(num_classes=max(a.classes, 1000))
    else:
        model = tiny_model(a.classes)
    model = model.to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    crit = torch.nn.CrossEntropyLoss()
    make = {"synthetic": synthetic_batches, "stokehold-gpu": lambda a: stokehold_batches(a, "gpu"),
            "stokehold-gpu-copy": lambda a: stokehold_batches(a, "gpu", copy="torch"),
            "stokehold-cpu": lambda a: stokehold_batches(a, "cpu"),
            "stokehold-cpu-pycopy": lambda a: stokehold_batches(a, "cpu", copy="pycopy"),
            "stokehold-cpu-pinned": lambda a: stokehold_batches(a, "cpu", copy="pinned"), "dali": dali_batches,
            "dataloader": dataloader_batches}[a.child]
    batches = make(a)
    if gpu:
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(a.steps)]
    step_seconds = waited = 0.0
    waits = []
    images = 0
    threads_at_start = None
    for i in range(warmup + a.steps):
        timed = i >= warmup
        if i == warmup:
            if gpu:
                torch.cuda.synchronize()
            threads_at_start = pipeline_threads()
            t0 = time.perf_counter()
        asked = time.perf_counter()
        x, y = next(batches)
        got = time.perf_counter()
        assert tuple(x.shape) == (a.batch, 3, a.size, a.size) and x.device.type == device.type, (x.shape, x.device)
        if busy is not None:
            busy()
        else:
            if timed and gpu:
                events[i - warmup][0].record()
            x = x.contiguous(memory_format=torch.channels_last)
            with torch.autocast(device.type, dtype=torch.bfloat16):
                loss = crit(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if timed and gpu:
                events[i - warmup][1].record()
        if timed:
            waited += got - asked
            waits.append(got - asked)
            step_seconds += time.perf_counter() - got
            images += x.shape[0]
    if gpu:
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    cpu, wakeups = (n - s for n, s in zip(pipeline_threads(), threads_at_start))
    if gpu and busy is None:
        busy_seconds = sum(s.elapsed_time(e) for s, e in events) / 1000
        peak = torch.cuda.max_memory_allocated() / 2**30
    else:
        busy_seconds = step_seconds
        peak = peak_host_memory_gib()
    print(RESULT + json.dumps({
        "loader": a.child, "batch": a.batch, "steps": a.steps, "warmup": warmup, "images": images,
        "seconds": wall, "throughput": images / wall, "loader_wait_ms": 1000 * waited / a.steps,
        "gpu_busy": 100 * busy_seconds / wall, "peak_mem_gib": peak, "describe": getattr(a, "describe", ""),
        "pipeline_cpu_ms": 1000 * cpu / a.steps, "pipeline_wakeups": wakeups / a.steps,
        "slowed_pct": None if alone is None else 100 * (wall / alone - 1),
        "wait_median_ms": 1000 * sorted(waits)[len(waits) // 2], "wait_max_ms": 1000 * max(waits),
        "pipeline": pipeline_summary(getattr(a, "pipeline", None)),
    }), flush=True)
    # DataLoader workers and DALI threads need not be joined: the figures are out.
    sys.stdout.flush()
    os._exit(0)


# ---------------------------------------------------------------------------- the parent

def dali_importable():
    try:
        return importlib.util.find_spec("nvidia.dali") is not None
    except ModuleNotFoundError:  # no "nvidia" package at all
        return False


def run_loader(a, name):
    """The figures of one loader, from its own process."""
    if name == "dali" and not dali_importable():
        return {"loader": name, "skipped": "nvidia.dali is not importable"}
    cmd = [sys.executable, __file__, "--child", name, "--list", str(a.list), "--mode", a.mode,
           "--batch", str(a.batch), "--steps", str(a.steps), "--warmup", str(a.warmup), "--size", str(a.size),
           "--workers", str(a.workers), "--upsampling", a.upsampling, "--train-stream", a.train_stream]
    for flag, value in (("--threads", a.threads), ("--prefetch", a.prefetch), ("--torch-threads", a.torch_threads),
                        ("--consumer-busy-ms", a.consumer_busy_ms)):
        if value is not None:
            cmd += [flag, str(value)]
    run = subprocess.run(cmd, capture_output=True, text=True)
    for line in run.stdout.splitlines():
        if line.startswith(RESULT):
            return json.loads(line[len(RESULT):])
    last = (run.stderr.strip().splitlines() or [f"exit status {run.returncode}"])[-1]
    sys.stderr.write(run.stderr)
    return {"loader": name, "failed": last}


def main():
    if importlib.util.find_spec("torch") is None:
        sys.exit("the training benchmark trains with PyTorch: pip install torch torchvision "
                 "(the CPU wheels do for --mode cpu)")
    a = settle_mode(parse_args())
    if a.child:
        return child(a)
    default = LOADERS if a.mode == "gpu" else CPU_MODE_LOADERS
    loaders = [n for n in a.loaders.split(",") if n] if a.loaders is not None else list(default)
    unknown = [n for n in loaders if n not in LOADERS]
    if unknown:
        sys.exit(f"unknown loaders {unknown}: choose from {LOADERS}")
    if "synthetic" not in loaders:
        loaders.insert(0, "synthetic")  # the reference every other figure is a share of
    if a.data is None:
        import stokehold
        a.data = Path(stokehold.builtin_data())
    pairs = list_files(a.data) * max(a.repeat, 1)
    import torch
    with tempfile.TemporaryDirectory() as tmp:
        a.list = Path(tmp) / "files.txt"
        write_list(pairs, a.list)
        what = "GPU: " + torch.cuda.get_device_name(0) if a.mode == "gpu" else f"CPU, {os.cpu_count()} cores"
        model = "fixed Python computation of %g ms" % a.consumer_busy_ms if a.consumer_busy_ms is not None else (
            "ResNet-50 (bf16 autocast, channels_last, SGD)" if a.mode == "gpu" else "a tiny CNN (bf16 autocast, SGD)")
        print(f"mode={a.mode} ({what}; torch {torch.__version__}, torch threads {torch.get_num_threads()}); "
              f"step: {model}; {len(pairs)} files from {a.data}; every loader drops each epoch's last "
              f"partial batch (equal shapes); upsampling={a.upsampling} (DataLoader: Pillow, always fancy"
              f"{'' if a.mode == 'gpu' else '; DALI CPU: always fancy'})"
              f"{'; training on a side stream' if a.train_stream == 'side' else ''}", flush=True)
        results = [run_loader(a, name) for name in loaders]
    base = next((r["throughput"] for r in results if r["loader"] == "synthetic" and "throughput" in r), None)
    for r in results:
        print(line_of(r, base), flush=True)
    if a.consumer_busy_ms is not None:
        for r in results:
            if r.get("slowed_pct") is not None and r["loader"] != "synthetic":
                # The DataLoader's and DALI's work is in other processes or unnamed threads.
                threads = (f" (pipeline threads {r['pipeline_cpu_ms']:.1f} ms CPU and {r['pipeline_wakeups']:.1f} "
                           f"wake-ups per step)" if r["loader"].startswith("stokehold") else "")
                print(f"loader={r['loader']} consumer slowed by {r['slowed_pct']:.1f}%{threads}")
    print_table(results, base)
    return 1 if any("failed" in r for r in results) else 0


def line_of(r, base):
    if "skipped" in r:
        return f"loader={r['loader']} skipped: {r['skipped']}"
    if "failed" in r:
        return f"loader={r['loader']} failed: {r['failed']}"
    share = f"{100 * r['throughput'] / base:.1f}%" if base else "n/a"
    return (f"loader={r['loader']} batch={r['batch']} steps={r['steps']} throughput={r['throughput']:.1f} img/s "
            f"of_synthetic={share} loader_wait={r['loader_wait_ms']:.2f}ms/step gpu_busy={r['gpu_busy']:.1f}% "
            f"peak_mem={r['peak_mem_gib']:.2f}GiB wait_median={r['wait_median_ms']:.2f}ms wait_max={r['wait_max_ms']:.1f}ms"
            + ("" if not r.get("pipeline") else " pipeline=" + json.dumps(r["pipeline"], separators=(",", ":"))))


def print_table(results, base):
    print()
    print("| loader | img/s | % of synthetic | loader wait ms/step | GPU busy | peak memory | settings |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        if "throughput" not in r:
            print(f"| {r['loader']} | {r.get('skipped') or 'failed: ' + r['failed']} | | | | | |")
            continue
        share = f"{100 * r['throughput'] / base:.1f}%" if base else "n/a"
        print(f"| {r['loader']} | {r['throughput']:.1f} | {share} | {r['loader_wait_ms']:.2f} | {r['gpu_busy']:.1f}% "
              f"| {r['peak_mem_gib']:.2f} GiB | {r['describe']} |")


if __name__ == "__main__":
    sys.exit(main())

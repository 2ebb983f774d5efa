"""The training benchmark (examples/python/bench_training.py) in its CPU mode: a tiny network
trained a few steps on the built-in demo images, fed by each loader in its own process; and
its busy consumer. Checks what it prints, not how fast anything was. Skipped, and listed as
skipped, where torch or torchvision is not installed."""

import re
import subprocess
import sys

import pytest

from conftest import REPO

pytest.importorskip("torch", reason="[extra:torch] torch is not installed: the training benchmark did not run")
pytest.importorskip("torchvision", reason="[extra:torchvision] torchvision is not installed: the training benchmark did not run")

BENCH = REPO / "examples" / "python" / "bench_training.py"
NUMBER = r"-?[0-9]+(?:\.[0-9]+)?"
LINE = re.compile(
    rf"^loader=(?P<name>[a-z-]+) batch=(?P<batch>[0-9]+) steps=(?P<steps>[0-9]+) "
    rf"throughput=(?P<throughput>{NUMBER}) img/s of_synthetic=(?P<share>{NUMBER})% "
    rf"loader_wait=(?P<wait>{NUMBER})ms/step gpu_busy=(?P<busy>{NUMBER})% peak_mem=(?P<mem>{NUMBER})GiB "
    rf"wait_median=(?P<wait_median>{NUMBER})ms wait_max=(?P<wait_max>{NUMBER})ms(?: pipeline=(?P<pipeline>\{{\S*\}}))?$")
ALWAYS = ["synthetic", "stokehold-gpu", "stokehold-cpu", "stokehold-cpu-pinned", "dataloader"]


def bench(*args):
    run = subprocess.run([sys.executable, str(BENCH), "--mode", "cpu", *args],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def test_the_cpu_mode_prints_a_line_per_loader_and_the_table(builtin):
    # 64 images in batches of 16: the warm-up crosses the first epoch's end after 5 steps.
    out = bench("--data", str(builtin), "--batch", "16", "--steps", "3", "--workers", "2", "--threads", "1")
    lines = {m["name"]: m for m in map(LINE.match, out.splitlines()) if m}
    for name in ALWAYS:
        assert name in lines, out
        m = lines[name]
        assert (m["batch"], m["steps"]) == ("16", "3"), m.group(0)
        assert float(m["throughput"]) > 0, m.group(0)
    assert float(lines["synthetic"]["share"]) == 100.0
    # DALI runs where it is importable, and says so where it is not.
    assert "dali" in lines or re.search(r"^loader=dali skipped: \S", out, re.M), out
    assert "every loader drops each epoch's last partial batch" in out, out
    rows = [line for line in out.splitlines() if line.startswith("| ") and not line.startswith("| loader")
            and not line.startswith("| ---")]
    assert [r.split(" | ")[0].removeprefix("| ") for r in rows] == ["synthetic", "stokehold-gpu", "stokehold-cpu",
                                                                   "stokehold-cpu-pinned", "dali", "dataloader"], out
    # The pinned loader ran with the emulated device's pinned memory.
    assert "batch_memory=emu-pinned" in out, out


def test_a_busy_consumer_is_told_how_much_each_loader_slowed_it(builtin):
    out = bench("--data", str(builtin), "--batch", "16", "--steps", "4", "--loaders", "stokehold-cpu",
                "--threads", "1", "--consumer-busy-ms", "5")
    assert "step: fixed Python computation of 5 ms" in out, out
    assert {m["name"] for m in map(LINE.match, out.splitlines()) if m} == {"synthetic", "stokehold-cpu"}, out
    assert re.search(rf"^loader=stokehold-cpu consumer slowed by {NUMBER}% \(pipeline threads {NUMBER} ms CPU "
                     rf"and {NUMBER} wake-ups per step\)$", out, re.M), out


def test_the_chroma_upsampling_is_chosen_for_every_loader_and_said_in_the_header(builtin):
    # stokehold's decode op (and DALI's jpeg_fancy_upsampling) take it; the DataLoader's Pillow
    # always decodes fancy, and so does DALI's CPU decoder, which the header says.
    out = bench("--data", str(builtin), "--batch", "16", "--steps", "2", "--loaders", "stokehold-cpu",
                "--threads", "1", "--upsampling", "nearest")
    assert "; upsampling=nearest (DataLoader: Pillow, always fancy; DALI CPU: always fancy)" in out, out
    assert {m["name"] for m in map(LINE.match, out.splitlines()) if m} == {"synthetic", "stokehold-cpu"}, out


def test_the_gpu_paths_batches_copied_into_torchs_memory_run_where_named(builtin):
    # Not a default of the CPU mode (a host copy there); named, it runs on the emulated device.
    out = bench("--data", str(builtin), "--batch", "16", "--steps", "2", "--loaders", "stokehold-gpu-copy",
                "--threads", "1")
    lines = {m["name"]: m for m in map(LINE.match, out.splitlines()) if m}
    assert set(lines) == {"synthetic", "stokehold-gpu-copy"}, out
    assert float(lines["stokehold-gpu-copy"]["throughput"]) > 0, out
    assert "device=emu threads=1 copied into PyTorch's memory |" in out, out

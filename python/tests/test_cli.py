"""The command line from the Python package: the `stokehold` command pip installs and
`python -m stokehold`, the same program as the Rust binary; the shipped pipeline files."""

import subprocess
import sys
from pathlib import Path

import pytest

import stokehold
from conftest import TRAIN


def test_python_m_stokehold_checks_a_shipped_pipeline():
    train = stokehold.pipelines.path("resnet50-train")
    out = subprocess.run([sys.executable, "-m", "stokehold", "check", train],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"{train}: ok" in out.stdout and "runs on: cpu" in out.stdout


def test_python_m_stokehold_bench_counts_heap_allocations(builtin):
    # The native module installs the counting allocator, as the Rust binary does.
    out = subprocess.run([sys.executable, "-m", "stokehold", "bench",
                          stokehold.pipelines.path("resnet50-eval"), "--data", str(builtin),
                          "--batch", "8", "--epochs", "1", "--stats"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    line = next((l for l in out.stdout.splitlines() if l.startswith("heap allocations")), None)
    assert line and line.startswith("heap allocations during the timed epochs: "), out.stdout
    per_image = float(line.split("(")[1].split(" an image")[0])
    assert 0 < per_image < 1000, line


def test_the_installed_command_reports_every_problem_with_exit_status_1(tmp_path):
    command = Path(sys.executable).parent / "stokehold"
    if not command.exists():
        pytest.skip("[python:stokehold] the stokehold command is not installed next to python")
    bad = tmp_path / "bad.toml"
    bad.write_text(TRAIN.read_text().replace("size = 224", 'size = "224"'))
    out = subprocess.run([str(command), "check", str(bad)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert f"{bad}:" in out.stderr and "help: write it without quotes" in out.stderr
    out = subprocess.run([str(command), "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("stokehold "), out


def test_the_shipped_pipelines_are_installed_with_the_package(builtin):
    names = stokehold.pipelines.names()
    assert {"resnet50-train", "resnet50-eval"} <= set(names), names
    for name in names:
        p = Path(stokehold.pipelines.path(name))
        assert p.is_file() and p.read_text() == (TRAIN.parent / f"{name}.toml").read_text()
    assert stokehold.pipelines.path("resnet50-eval.toml") == stokehold.pipelines.path("resnet50-eval")
    p = stokehold.Pipeline(stokehold.pipelines.path("resnet50-eval"), builtin, batch=8, epochs=1)
    assert next(iter(p))["images"].shape == (8, 3, 224, 224)
    with pytest.raises(stokehold.PipelineError, match="no shipped pipeline is called") as e:
        stokehold.pipelines.path("resnet50")
    assert "resnet50-train" in e.value.help

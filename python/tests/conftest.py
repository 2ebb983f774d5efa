"""Shared fixtures: the repository's pipelines, the built-in demo images, small folders."""

import shutil
from pathlib import Path

import pytest

import stokehold

REPO = Path(__file__).resolve().parents[2]
PIPELINES = REPO / "pipelines"
TRAIN = PIPELINES / "resnet50-train.toml"
EVAL = PIPELINES / "resnet50-eval.toml"


@pytest.fixture(scope="session")
def builtin(tmp_path_factory) -> Path:
    """The built-in demo images (64 JPEG/PNG files in 4 class folders), in a private folder."""
    return Path(stokehold.builtin_data(tmp_path_factory.mktemp("builtin") / "data"))


def image_files(root: Path):
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith("."))


@pytest.fixture
def flat_jpegs(builtin, tmp_path) -> Path:
    """A flat folder of the demo set's JPEGs (no labels), to damage in tests."""
    out = tmp_path / "flat"
    out.mkdir()
    for p in image_files(builtin):
        if p.suffix.lower() == ".jpg":
            shutil.copy(p, out / f"{p.parent.name}_{p.name}")
    return out


def batch_count(pipeline) -> int:
    return sum(1 for _ in pipeline)


@pytest.fixture(autouse=True)
def no_torchrun_env(monkeypatch):
    """Tests choose ranks themselves: a surrounding torchrun's variables don't leak in."""
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(k, raising=False)

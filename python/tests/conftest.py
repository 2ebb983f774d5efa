"""Shared fixtures: the repository's pipelines, the built-in demo images, small folders; and
the skip log (docs/testing.md): every skip's reason starts with its kind in brackets, e.g.
`[extra:torch] torch is not installed`, and is appended to $STOKEHOLD_SKIP_LOG as the Rust
tests append theirs (src/testutil/skip.rs)."""

import os
import re
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


SKIP_KIND = re.compile(r"^\[([a-z0-9][a-z0-9:._-]*)\]\s*")


def skip_entry(report):
    """(kind, test, reason) of a skipped test or module; kind `untyped` without a tag."""
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    reason = reason.removeprefix("Skipped: ")
    m = SKIP_KIND.match(reason)
    kind, reason = (m.group(1), reason[m.end():]) if m else ("untyped", reason)
    return kind, report.nodeid, reason


def pytest_terminal_summary(terminalreporter):
    """Appends every skip (of a test, or of a whole module at collection) to the skip log."""
    log = os.environ.get("STOKEHOLD_SKIP_LOG")
    if not log:
        return
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        for report in terminalreporter.stats.get("skipped", []):
            fields = (" ".join(f.split()) for f in skip_entry(report))
            # One write per line: other processes may append to the same file.
            os.write(fd, ("\t".join(fields) + "\n").encode())
    finally:
        os.close(fd)


def batch_count(pipeline) -> int:
    return sum(1 for _ in pipeline)


@pytest.fixture(autouse=True)
def no_torchrun_env(monkeypatch):
    """Tests choose ranks themselves: a surrounding torchrun's variables don't leak in."""
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(k, raising=False)

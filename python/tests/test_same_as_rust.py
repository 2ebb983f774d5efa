"""The Python package gives the very batches the Rust API gives for the same pipeline, data
and seed: same samples in the same order, same labels, bit-identical images."""

import shutil
import subprocess

import numpy as np
import pytest

import stokehold
from conftest import REPO, TRAIN


def rust_batches(builtin, out, batch, seed, epochs):
    """Runs examples/dump_batches.rs (the Rust API) and reads what it wrote."""
    cargo = shutil.which("cargo")
    if cargo is None:
        pytest.skip("[tool:cargo] cargo not found: the Rust side of the comparison can't be built")
    # --release: what scripts/test.sh and `pip install .` built already (a debug build would
    # compile every dependency again).
    cmd = [cargo, "run", "--quiet", "--release", "--example", "dump_batches", "--",
           str(TRAIN), str(builtin), str(out), str(batch), str(seed), str(epochs)]
    subprocess.run(cmd, cwd=REPO, check=True)
    rows = []
    for line in (out / "batches.tsv").read_text().splitlines():
        epoch, index, padded, indices, labels = line.split("\t")
        rows.append((int(epoch), int(index), int(padded),
                     [int(i) for i in indices.split(",")], [int(l) for l in labels.split(",")]))
    return rows


def test_identical_batches_to_the_rust_api(builtin, tmp_path):
    batch, seed, epochs = 12, 7, 2
    rows = rust_batches(builtin, tmp_path, batch, seed, epochs)
    p = stokehold.Pipeline(TRAIN, builtin, batch=batch, seed=seed, epochs=epochs, threads=2)
    got = []
    for _ in range(epochs):
        for b in p:
            got.append(b)
    assert len(got) == len(rows) == epochs * len(p)
    for b, (epoch, index, padded, indices, labels) in zip(got, rows):
        assert (b.epoch, b.index, b.padded) == (epoch, index, padded)
        assert [s.index for s in b.samples] == indices
        assert [s.label for s in b.samples] == labels
        assert np.from_dlpack(b["labels"]).tolist() == labels
        rust_images = (tmp_path / f"e{epoch}-b{index}-images.bin").read_bytes()
        assert np.from_dlpack(b["images"]).tobytes() == rust_images, (epoch, index)

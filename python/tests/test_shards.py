"""WebDataset tar shards from Python: ``data=`` takes a folder of shards, a brace pattern or
http(s) URLs (the pipeline's file reader becomes a shard reader), ranks split the shards with
equal batch counts, and a state_dict resumes a shard run."""

import functools
import http.server
import tarfile
import threading
from collections import Counter
from pathlib import Path

import pytest

import stokehold
from conftest import EVAL, TRAIN, image_files

SHARDS = 3


@pytest.fixture
def shards(builtin, tmp_path) -> Path:
    """The demo images packed as WebDataset shards (``<key>.jpg``/``.png`` + ``<key>.cls``,
    the label being the class folder's index in sorted order), written by Python's tarfile."""
    classes = sorted(p.name for p in builtin.iterdir() if p.is_dir())
    files = image_files(builtin)
    out = tmp_path / "shards"
    out.mkdir()
    for s in range(SHARDS):
        with tarfile.open(out / f"train-{s:06d}.tar", "w") as tar:
            for f in files[s::SHARDS]:
                key = f"{f.parent.name}/{f.stem}"
                tar.add(f, arcname=key + f.suffix.lower())
                cls = out / "label.tmp"
                cls.write_text(str(classes.index(f.parent.name)))
                tar.add(cls, arcname=key + ".cls")
    (out / "label.tmp").unlink()
    return out


def labels_of(pipeline):
    return Counter(int(s.label) for b in pipeline for s in b.samples)


def test_a_folder_a_pattern_and_a_url_of_shards_give_the_folders_samples(builtin, shards):
    want = labels_of(stokehold.Pipeline(EVAL, builtin, batch=16, threads=2, epochs=1))
    assert sum(want.values()) == 64
    p = stokehold.Pipeline(EVAL, shards, batch=16, threads=2, epochs=1)
    # Class names come from a folder's class folders, or a shard set's index (none here).
    folder = stokehold.Pipeline(EVAL, builtin, batch=16, threads=2, epochs=1)
    assert folder.classes == sorted(d.name for d in builtin.iterdir() if d.is_dir())
    assert p.classes == []
    batches = list(p)
    assert len(batches) == len(p) == 4
    assert Counter(int(s.label) for b in batches for s in b.samples) == want
    assert all(".tar:" in s.path for b in batches for s in b.samples), "shard:member paths"
    pattern = f"{shards}/train-{{000000..{SHARDS - 1:06d}}}.tar"
    assert labels_of(stokehold.Pipeline(EVAL, pattern, batch=16, threads=2, epochs=1)) == want

    handler = functools.partial(QuietHandler, directory=str(shards))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/train-{{000000..{SHARDS - 1:06d}}}.tar"
        assert labels_of(stokehold.Pipeline(EVAL, url, batch=16, threads=2, epochs=1)) == want
    finally:
        server.shutdown()
        server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.mark.parametrize("world_size", [2, 3])
def test_ranks_split_shards_with_equal_batch_counts_and_cover_the_set(shards, world_size):
    runs = [stokehold.Pipeline(TRAIN, shards, batch=5, threads=2, epochs=1, rank=r, world_size=world_size)
            for r in range(world_size)]
    assert len({len(p) for p in runs}) == 1, "len() is the same on every rank"
    batches = [list(p) for p in runs]
    assert {len(b) for b in batches} == {len(runs[0])}, "and so are the batches"
    for r, p in enumerate(runs):
        assert (p.rank, p.world_size) == (r, world_size)
    seen = [s.index for bs in batches for b in bs for s in b.samples]
    assert set(seen) == set(range(64)), "together the ranks read every sample"
    assert len(seen) == -(-64 // world_size) * world_size, "every rank reads as many samples"


def test_torchrun_environment_sets_the_rank_of_a_shard_reader(shards, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    p = stokehold.Pipeline(EVAL, shards, batch=8)
    assert (p.rank, p.world_size, p.samples_per_epoch) == (1, 2, 32)


def test_a_shard_run_resumes_from_its_state_dict(shards):
    def make():
        return stokehold.Pipeline(TRAIN, shards, batch=6, seed=4, threads=2, epochs=1)

    whole = [[s.index for s in b.samples] for b in make()]
    first = make()
    it = iter(first)
    seen = [[s.index for s in next(it).samples] for _ in range(4)]
    assert seen == whole[:4]
    resumed = make()
    resumed.load_state_dict(first.state_dict())
    assert [[s.index for s in b.samples] for b in resumed] == whole[4:]


def test_replace_is_refused_with_a_shard_reader(shards):
    with pytest.raises(stokehold.PipelineError, match="replace") as e:
        stokehold.Pipeline(EVAL, shards, on_error="replace")
    assert "skip" in e.value.help

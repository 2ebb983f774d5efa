"""Data-parallel ranks: disjoint parts of every epoch that together are the whole data set,
and the same number of batches on every rank (a rank a batch short reads a flagged repeat)."""

import pytest

import stokehold
from conftest import EVAL, TRAIN, image_files


def one_epoch(pipeline, **kw):
    p = stokehold.Pipeline(pipeline["file"], pipeline["data"], threads=2, epochs=1, **kw)
    batches = list(p)
    real = [s.index for b in batches for s in b.samples if not s.padding]
    pads = [s for b in batches for s in b.samples if s.padding]
    for b in batches:
        assert sum(s.padding for s in b.samples) == b.padded
        assert all(s.padding for s in b.samples[len(b) - b.padded:]), "padding comes last"
    return p, batches, real, pads


@pytest.mark.parametrize("world_size,batch,last_batch_pads", [(2, 8, 0), (2, 32, 0), (3, 7, 2), (3, 3, 2), (3, 11, 0)])
def test_ranks_are_disjoint_cover_all_and_have_equal_batch_counts(builtin, world_size, batch, last_batch_pads):
    n = len(image_files(builtin))
    assert n == 64
    runs = [one_epoch({"file": TRAIN, "data": builtin}, batch=batch, rank=r, world_size=world_size)
            for r in range(world_size)]
    counts = {len(p) for p, _, _, _ in runs}
    assert len(counts) == 1, "len() is the same on every rank"
    assert {len(batches) for _, batches, _, _ in runs} == counts, "and so are the batches"
    real = [i for _, _, r, _ in runs for i in r]
    assert len(real) == len(set(real)) == n, "real samples are disjoint and cover the set"
    pads = [s for _, _, _, ps in runs for s in ps]
    assert len(pads) == last_batch_pads
    for r, (p, _, mine, ps) in enumerate(runs):
        assert (p.rank, p.world_size) == (r, world_size)
        assert p.samples_per_epoch == len(mine)
        assert all(s.index in mine for s in ps), "a rank pads with its own samples"


def test_torchrun_environment_sets_the_rank(builtin, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("LOCAL_RANK", "1")
    p = stokehold.Pipeline(EVAL, builtin, batch=8)
    assert (p.rank, p.world_size, p.samples_per_epoch) == (1, 3, 21)
    # Arguments win over the environment.
    q = stokehold.Pipeline(EVAL, builtin, batch=8, rank=0, world_size=2)
    assert (q.rank, q.world_size, q.samples_per_epoch) == (0, 2, 32)


def test_bad_ranks_are_refused(builtin, monkeypatch):
    with pytest.raises(stokehold.PipelineError, match="less than the world size"):
        stokehold.Pipeline(EVAL, builtin, rank=2, world_size=2)
    with pytest.raises(stokehold.PipelineError, match="no world size"):
        stokehold.Pipeline(EVAL, builtin, rank=1)
    monkeypatch.setenv("WORLD_SIZE", "4")
    with pytest.raises(stokehold.PipelineError, match="no rank"):
        stokehold.Pipeline(EVAL, builtin)


# A flat folder has no labels: test_a_flat_folder_warns_that_its_labels_are_missing
# checks that warning; here it is beside the point.
@pytest.mark.filterwarnings("ignore:the data set has no labels:stokehold.DataWarning")
@pytest.mark.parametrize("last_batch", ["partial", "drop", "pad"])
def test_a_damaged_rank_yields_as_many_batches_as_the_others(flat_jpegs, tmp_path, last_batch):
    # The eval pipeline reads in listing order: rank 1 holds the second half, most of which
    # is damaged. It must still yield len(pipeline) batches (else DDP hangs on rank 0).
    files = image_files(flat_jpegs)
    half = len(files) // 2
    for p in files[half:half + half - 2]:
        p.write_bytes(b"not a jpeg")
    pipeline = tmp_path / "eval.toml"
    text = EVAL.read_text()
    assert 'last_batch = "partial"' in text
    pipeline.write_text(text.replace('last_batch = "partial"', f'last_batch = "{last_batch}"'))
    runs = []
    for r in range(2):
        p = stokehold.Pipeline(pipeline, flat_jpegs, batch=4, epochs=1, threads=2, rank=r,
                               world_size=2)
        batches = list(p)
        assert len(batches) == len(p), f"rank {r}"
        for b in batches:
            assert all(s.padding for s in b.samples[len(b) - b.padded:]), "padding comes last"
        runs.append(batches)
    assert {len(b) for b in runs[1][:-1]} == {4}, "only the last batch may be short"
    listed = sum(len(b.skipped) for b in runs[1])
    assert listed == half - 2, "every skip listed"


def test_the_gpu_is_the_one_named_else_the_ranks_else_the_pipelines(builtin, monkeypatch):
    # Checked before any GPU is opened: the GPU the path would run on, against the one
    # batch_memory names.
    spec = {
        "pipeline": {"batch": 8, "seed": 1, "outputs": ["images"], "device": "gpu", "device_id": 1},
        "op": [
            {"kind": "file_reader", "outputs": ["jpegs"]},
            {"kind": "decode", "input": "jpegs", "output": "decoded"},
            {"kind": "resize", "input": "decoded", "output": "images", "size": [32, 32]},
        ],
    }
    with pytest.raises(stokehold.PipelineError, match="names GPU 0, but the GPU path would run on GPU 1"):
        stokehold.Pipeline(spec, builtin, batch_memory="cuda:0")
    with pytest.raises(stokehold.PipelineError, match="on GPU 3"):
        stokehold.Pipeline(spec, builtin, device="cuda:3", batch_memory="cuda:0")
    monkeypatch.setenv("LOCAL_RANK", "2")
    with pytest.raises(stokehold.PipelineError, match="on GPU 2"):
        stokehold.Pipeline(spec, builtin, batch_memory="cuda:0")

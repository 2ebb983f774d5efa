"""state_dict()/load_state_dict(): resuming mid-epoch gives the batches an uninterrupted run
would have given (torchdata's StatefulDataLoader contract)."""

import numpy as np
import pytest

import stokehold
from conftest import EVAL, TRAIN


def fingerprint(b):
    return (b.epoch, b.index, [s.index for s in b.samples], np.from_dlpack(b["images"]).tobytes())


def run(p, epochs):
    return [fingerprint(b) for _ in range(epochs) for b in p]


def make(builtin, **kw):
    return stokehold.Pipeline(TRAIN, builtin, batch=10, seed=3, epochs=2, threads=2, **kw)


@pytest.mark.parametrize("stop_after", [3, 7, 9])
def test_resume_mid_epoch_gives_the_same_remaining_batches(builtin, stop_after):
    whole = run(make(builtin), 2)
    assert len(whole) == 14  # 64 images in batches of 10: 7 per epoch
    first = make(builtin)
    seen, state, it = [], None, iter(first)
    while len(seen) < stop_after:
        try:
            seen.append(fingerprint(next(it)))
        except StopIteration:
            it = iter(first)
            continue
        state = first.state_dict()
    assert seen == whole[:stop_after]
    resumed = make(builtin)
    resumed.load_state_dict(state)
    assert resumed.epoch == stop_after // 7
    rest = [fingerprint(b) for _ in range(2 - resumed.epoch) for b in resumed]
    assert rest == whole[stop_after:]


def test_after_a_whole_epoch_the_state_starts_the_next(builtin):
    p = make(builtin)
    n = sum(1 for _ in p)
    state = p.state_dict()
    assert (state["epoch"], state["sample"], state["batch"]) == (1, 0, 0)
    q = make(builtin)
    q.load_state_dict(state)
    assert q.epoch == 1 and sum(1 for _ in q) == n == len(q)
    assert sum(1 for _ in q) == 0, "two epochs were asked for"


def test_close_and_iterate_again_continues(builtin):
    whole = run(make(builtin), 1)
    p = make(builtin)
    it = iter(p)
    head = [fingerprint(next(it)) for _ in range(2)]
    p.close()
    rest = [fingerprint(b) for b in p]
    assert head + rest == whole


def test_a_state_of_another_rank_or_seed_is_refused(builtin):
    saved = make(builtin)
    next(iter(saved))
    state = saved.state_dict()  # mid-epoch: batch 1 of epoch 0
    assert (state["sample"], state["batch"]) == (10, 1)
    other = stokehold.Pipeline(TRAIN, builtin, batch=10, seed=3, rank=1, world_size=2)
    with pytest.raises(stokehold.PipelineError, match="rank 0 of 1"):
        other.load_state_dict(state)
    with pytest.raises(stokehold.PipelineError, match="seed 3"):
        stokehold.Pipeline(TRAIN, builtin, batch=10, seed=4).load_state_dict(state)
    # Another batch size would give other batches: refused, saying which to use.
    other = stokehold.Pipeline(TRAIN, builtin, batch=8, seed=3, threads=2)
    with pytest.raises(stokehold.PipelineError, match="batches of 10") as e:
        other.load_state_dict(state)
    assert "batch=10" in str(e.value)
    # A refused state leaves the pipeline as it was: it still runs.
    assert len(list(other)) == len(other)
    # A state saved before the batch size was recorded still loads.
    del state["batch_size"]
    make(builtin).load_state_dict(state)


def test_a_state_saved_at_an_epochs_end_goes_on_with_other_ranks_and_batches(builtin):
    p = make(builtin)
    for _ in p:
        pass
    state = p.state_dict()
    assert (state["epoch"], state["sample"], state["batch"]) == (1, 0, 0)
    # Twice the GPUs, smaller batches: the next epoch is the one such a run would give.
    settings = dict(batch=8, seed=3, epochs=2, threads=2, rank=1, world_size=2)
    fresh = stokehold.Pipeline(TRAIN, builtin, **settings)
    expected = run(fresh, 2)[-len(fresh):]
    resumed = stokehold.Pipeline(TRAIN, builtin, **settings)
    resumed.load_state_dict(state)
    assert resumed.epoch == 1
    assert [fingerprint(b) for b in resumed] == expected
    assert resumed.state_dict()["world_size"] == 2


@pytest.mark.filterwarnings("ignore:the data set has no labels:stokehold.DataWarning")
def test_an_epoch_ending_in_bad_files_saves_the_next_epochs_start(flat_jpegs):
    # The epoch's last batch is full, and only a bad file follows it.
    good = len(list(flat_jpegs.glob("*.jpg")))
    (flat_jpegs / "zz_not_an_image.jpg").write_text("not a jpeg")
    p = stokehold.Pipeline(EVAL, flat_jpegs, batch=good, epochs=2, threads=1)
    assert [len(b) for b in p] == [good]
    state = p.state_dict()
    assert (state["epoch"], state["sample"], state["batch"]) == (1, 0, 0)
    q = stokehold.Pipeline(EVAL, flat_jpegs, batch=4, epochs=2, threads=1)
    q.load_state_dict(state)
    assert q.epoch == 1 and sum(len(b) for b in q) == good

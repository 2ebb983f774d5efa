"""Batches of the GPU path, checked on the emulated device (``device="emu"``): the CPU
path's values (within the tolerance of the chroma the GPU path rebuilds from the JPEG
engines' output, as ``stokehold compare`` allows), read zero-copy (the emulated device's memory is host memory, so its
batches say kDLCPU), each export waiting for the batch's ready event, and the memory going
back to the device pool only when the last array made from it goes."""

import gc

import numpy as np
import pytest

import stokehold
from conftest import EVAL, TRAIN

# compare's tolerance for the rebuilt chroma (pipeline/compare: rebuilt_min_psnr), over the
# range of the reference's values.
MIN_PSNR_DB = 48.0


def assert_close_to_cpu(cpu, emu):
    cpu, emu = np.asarray(cpu, dtype=np.float64), np.asarray(emu, dtype=np.float64)
    assert cpu.shape == emu.shape
    mse = float(np.mean((cpu - emu) ** 2))
    peak = float(cpu.max() - cpu.min()) or 1.0
    psnr = float("inf") if mse == 0 else 10 * np.log10(peak * peak / mse)
    assert psnr >= MIN_PSNR_DB, f"PSNR {psnr:.1f} dB against the CPU path"


@pytest.mark.parametrize("pipeline", [TRAIN, EVAL], ids=["train", "eval"])
def test_the_emulated_device_gives_the_cpu_values(builtin, pipeline):
    cpu = stokehold.Pipeline(pipeline, builtin, device="cpu", batch=8, threads=2, epochs=1)
    emu = stokehold.Pipeline(pipeline, builtin, device="emu", batch=8, threads=2, epochs=1)
    assert emu.device == "emu" and "emulated device" in emu.device_reason
    n = 0
    pairs = list(zip(cpu, emu))
    assert len(pairs) == len(cpu) == len(emu)
    for a, b in pairs:
        images = b["images"]
        assert images.__dlpack_device__() == (1, 0) and images.device == "cpu"
        x = np.from_dlpack(images)
        assert x.ctypes.data == images.data_ptr, "read in place"
        assert (images.shape, images.dtype, images.layout) == (a["images"].shape, "float32", "NCHW")
        assert_close_to_cpu(np.from_dlpack(a["images"]), x)
        assert np.array_equal(np.from_dlpack(a["labels"]), np.from_dlpack(b["labels"]))
        assert [(s.path, s.label, s.params) for s in a.samples] == [
            (s.path, s.label, s.params) for s in b.samples
        ]
        n += len(b)
    assert n == emu.samples_per_epoch
    gpu = emu.stats()["gpu"]
    assert sum(gpu["sources"].values()) == n, gpu["sources"]
    assert gpu["sources"].get("device-decoder:hardware", 0) > 0, gpu["sources"]
    assert "gpu" not in cpu.stats()


def test_an_export_waits_for_the_batch_to_be_written(builtin, monkeypatch):
    # A slow emulated device: each kernel launch waits 40 ms on its stream, so batches are
    # handed out before their kernels ran. Reading one must wait for its ready event.
    monkeypatch.setenv("STOKEHOLD_EMU_LAUNCH_DELAY_MS", "40")
    cpu = stokehold.Pipeline(EVAL, builtin, device="cpu", batch=8, threads=2, epochs=1)
    emu = stokehold.Pipeline(EVAL, builtin, device="emu", batch=8, threads=2, epochs=1, prefetch=3)
    for a, b in zip(cpu, emu):
        assert_close_to_cpu(np.from_dlpack(a["images"]), np.from_dlpack(b["images"]))


def test_device_memory_returns_to_the_pool_only_when_the_last_array_goes(builtin):
    p = stokehold.Pipeline(EVAL, builtin, device="emu", batch=8, threads=2, prefetch=1)
    it = iter(p)
    first = next(it)
    kept = np.from_dlpack(first["images"])
    ptr, snapshot = kept.ctypes.data, kept.copy()
    del first
    gc.collect()
    # The rest of the epoch: later batches take pooled device buffers, never the kept one,
    # and write nothing into it (freed memory would be poisoned, reused memory rewritten).
    later = [b["images"].data_ptr for b in it]
    assert later and ptr not in later
    assert np.array_equal(kept, snapshot)
    gpu = p.stats()["gpu"]
    assert isinstance(gpu["idle_device_buffers"], int)
    assert gpu["batches_in_flight"] >= 1, gpu
    assert isinstance(gpu["decode_area_waits"], int), gpu
    assert gpu["decode_groups_split"] == 0 and gpu["chroma_rebuilt_in_parts"] == 0, gpu
    assert isinstance(gpu["host_images_pinned_by_workers"], int), gpu
    # The split between the (emulated) engines and the CPU decoder, and the feeding
    # thread's calls, are counted.
    split = gpu["decoders"]
    assert split["engine_images"] + split["cpu_images"] > 0, split
    assert split["feed"]["calls"] >= 1 and split["feed"]["engines_call_seconds"] > 0, split
    del kept
    gc.collect()
    # Back in the pool: the next epochs hand it out again (the pool takes its oldest idle
    # buffer first, and the pipeline runs ahead, so not necessarily at once).
    again = [b["images"].data_ptr for _ in range(2) for b in p]
    assert ptr in again
    # The warm-up is over: the split's ceiling is known, and nothing was allocated since,
    # of any kind.
    gpu = p.stats()["gpu"]
    split = gpu["decoders"]
    assert 0.0 <= split["cpu_share"] <= split["cpu_share_ceiling"] <= 0.9, split
    assert isinstance(split["estimates_capped"], int), split
    assert isinstance(split["over_budget"], int), split
    assert gpu["allocations_after_warm_up_by_kind"] == dict.fromkeys(
        ["device_allocs", "device_frees", "pinned_allocs", "pinned_frees", "events_created"], 0
    ), gpu


def test_the_tensor_keeps_the_device_memory_after_its_batch_and_pipeline(builtin):
    p = stokehold.Pipeline(TRAIN, builtin, device="emu", batch=8, threads=1, epochs=1)
    t = next(iter(p))["images"]
    expected = np.from_dlpack(t).copy()
    del p
    gc.collect()
    a = np.from_dlpack(t)
    assert a.ctypes.data == t.data_ptr and np.array_equal(a, expected)


def test_an_unknown_device_names_the_emulated_one(builtin):
    with pytest.raises(stokehold.PipelineError) as e:
        stokehold.Pipeline(EVAL, builtin, device="tpu")
    assert "emu" in str(e.value)


def test_without_a_device_argument_the_pipelines_own_device_holds(builtin):
    # A pipeline whose settings say "emu": left out, the argument doesn't turn it into
    # "auto" (which would take the CPU path on a machine without a GPU); given, it wins.
    spec = {
        "pipeline": {"batch": 8, "seed": 1, "outputs": ["images"], "device": "emu"},
        "op": [
            {"kind": "file_reader", "outputs": ["jpegs"]},
            {"kind": "decode", "input": "jpegs", "output": "decoded"},
            {"kind": "resize", "input": "decoded", "output": "images", "size": [32, 32]},
        ],
    }
    own = stokehold.Pipeline(spec, builtin, threads=2, epochs=1)
    assert own.device == "emu", own.device_reason
    given = stokehold.Pipeline(spec, builtin, device="cpu", threads=2, epochs=1)
    assert given.device == "cpu", given.device_reason
    assert len(list(own)) == len(list(given)) > 0

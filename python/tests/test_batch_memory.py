"""``batch_memory``: the CPU path hands out its batches on the device, uploaded by the
pipeline. Checked on the emulated device (``batch_memory="emu"``: its memory is host memory,
so the batches say kDLCPU, read in place): the same samples and values as host batches, byte
for byte, and nothing allocated after the first epoch; without a GPU, ``"cuda"`` is refused at
once naming the setting; on a GPU (skipped elsewhere) the batch is a CUDA tensor for torch."""

import numpy as np
import pytest

import stokehold
from conftest import EVAL, TRAIN


@pytest.mark.parametrize("pipeline", [TRAIN, EVAL], ids=["train", "eval"])
def test_uploaded_batches_equal_the_host_batches(builtin, pipeline):
    host = stokehold.Pipeline(pipeline, builtin, device="cpu", batch=8, threads=2, epochs=1)
    up = stokehold.Pipeline(pipeline, builtin, device="cpu", batch_memory="emu", batch=8, threads=2, epochs=1)
    assert up.device == "cpu" and "batches uploaded to emulated device" in up.device_reason
    pairs = list(zip(host, up))
    assert len(pairs) == len(host) == len(up)
    for a, b in pairs:
        images = b["images"]
        assert images.__dlpack_device__() == (1, 0)
        x = np.from_dlpack(images)
        assert x.ctypes.data == images.data_ptr, "read in place"
        assert x.ctypes.data != a["images"].data_ptr, "the device's copy, not the host batch"
        assert np.array_equal(np.from_dlpack(a["images"]), x)
        assert np.array_equal(np.from_dlpack(a["labels"]), np.from_dlpack(b["labels"]))
        assert [s.index for s in a.samples] == [s.index for s in b.samples]
    assert "gpu" not in host.stats()


def test_the_upload_allocates_nothing_after_the_first_epoch(builtin):
    p = stokehold.Pipeline(EVAL, builtin, device="cpu", batch_memory="emu", batch=8, threads=2, epochs=3)
    # A consumer a step behind: the batch it uses and the one before, never a third (a list
    # of the last two plus the batch in hand held three, and the upload a sixth buffer when
    # the assembler came between them: a rare allocation on a loaded machine).
    previous = None
    for _ in range(3):
        for b in p:
            current = np.from_dlpack(b["images"])
            assert previous is None or previous.shape == current.shape  # still readable
            previous = current
    gpu = p.stats()["gpu"]
    assert gpu["allocations_after_warm_up"] == 0, gpu


def _has_cuda():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def test_without_a_gpu_cuda_batches_are_refused_naming_the_setting(builtin):
    if _has_cuda():
        pytest.skip("[no-gpu] a GPU is present: the upload runs (see the next test)")
    with pytest.raises(stokehold.DeviceError) as e:
        stokehold.Pipeline(EVAL, builtin, device="cpu", batch_memory="cuda", batch=8)
    assert 'batch_memory = "gpu"' in str(e.value) and "can't be uploaded" in str(e.value)


@pytest.mark.skipif(not _has_cuda(), reason="[gpu] no CUDA device for torch")
def test_on_a_gpu_the_cpu_path_hands_out_cuda_tensors(builtin):
    import torch
    host = stokehold.Pipeline(EVAL, builtin, device="cpu", batch=8, threads=2, epochs=1)
    up = stokehold.Pipeline(EVAL, builtin, device="cpu", batch_memory="cuda", batch=8, threads=2, epochs=1)
    for a, b in zip(host, up):
        x = torch.from_dlpack(b["images"])
        assert x.is_cuda
        assert torch.equal(x.cpu(), torch.from_dlpack(a["images"]))


def test_an_unknown_batch_memory_is_a_pipeline_error(builtin):
    with pytest.raises(stokehold.PipelineError) as e:
        stokehold.Pipeline(EVAL, builtin, device="cpu", batch_memory="tpu")
    assert "batch_memory" in str(e.value) and "cuda" in str(e.value)


# ``batch_memory="pinned"``: the CPU path's host batches in memory the GPU pinned, for a loop
# that copies them itself. Checked with the emulated device's pinned memory
# (``"emu-pinned"``): the same values as ordinary host batches, in memory of their own;
# buffers back when the last reference goes; nothing allocated after the first epoch.

@pytest.mark.parametrize("pipeline", [TRAIN, EVAL], ids=["train", "eval"])
def test_pinned_batches_equal_the_host_batches(builtin, pipeline):
    host = stokehold.Pipeline(pipeline, builtin, device="cpu", batch=8, threads=2, epochs=1)
    pinned = stokehold.Pipeline(pipeline, builtin, batch_memory="emu-pinned", batch=8, threads=2, epochs=1)
    # device="auto" takes the CPU path: the setting asks for its host batches.
    assert pinned.device == "cpu", pinned.device_reason
    assert "host batches pinned by emulated device" in pinned.device_reason
    pairs = list(zip(host, pinned))
    assert len(pairs) == len(host) == len(pinned)
    for a, b in pairs:
        images = b["images"]
        assert images.pinned and not a["images"].pinned
        assert images.__dlpack_device__() == (1, 0) and images.device == "cpu"
        assert (images.shape, images.dtype, images.layout) == (a["images"].shape, a["images"].dtype, a["images"].layout)
        x = np.from_dlpack(images)
        assert x.ctypes.data == images.data_ptr, "read in place"
        assert x.ctypes.data != a["images"].data_ptr, "pinned memory of its own"
        assert np.array_equal(np.from_dlpack(a["images"]), x)
        assert np.array_equal(np.from_dlpack(a["labels"]), np.from_dlpack(b["labels"]))
        assert [s.index for s in a.samples] == [s.index for s in b.samples]
    assert pinned.stats()["gpu"]["pinned_only"]


def test_pinned_buffers_come_back_and_nothing_is_allocated_after_the_first_epoch(builtin):
    p = stokehold.Pipeline(EVAL, builtin, batch_memory="emu-pinned", batch=8, threads=2, epochs=1)
    held = list(p)  # every batch of the epoch at once: a buffer each
    back = p.stats()["gpu"]["idle_pinned_buffers"]
    x = np.from_dlpack(held.pop()["images"])
    assert p.stats()["gpu"]["idle_pinned_buffers"] == back, "an array keeps it"
    del x
    assert p.stats()["gpu"]["idle_pinned_buffers"] == back + 1, "back with the last reference"
    del held
    assert p.stats()["gpu"]["idle_pinned_buffers"] == back + 8

    p = stokehold.Pipeline(EVAL, builtin, batch_memory="emu-pinned", batch=8, threads=2, epochs=3)
    kept = []
    for _ in range(3):
        for b in p:
            kept = (kept + [np.from_dlpack(b["images"])])[-2:]  # a consumer a step behind
    gpu = p.stats()["gpu"]
    assert gpu["allocations_after_warm_up"] == 0, gpu
    assert gpu["pinned_peak_bytes"] > 0 and gpu["device_peak_bytes"] == 0, gpu


def test_a_pinned_batch_names_the_stream_it_is_copied_on(builtin):
    class Stream:  # what torch.cuda.Stream offers: its CUstream handle
        cuda_stream = 0  # the emulated device's stream 0

    p = stokehold.Pipeline(EVAL, builtin, batch_memory="emu-pinned", batch=8, threads=2, epochs=1)
    for b in p:
        b["images"].record_stream(Stream())
        b["images"].record_stream(0)
        b["labels"].record_stream(0)  # host memory: nothing to do
    with pytest.raises(stokehold.DeviceError):
        next(iter(stokehold.Pipeline(EVAL, builtin, batch_memory="emu-pinned", batch=8, epochs=1)))["images"].record_stream(99)


def test_without_a_gpu_pinned_batches_are_refused_naming_the_setting(builtin):
    if _has_cuda():
        pytest.skip("[no-gpu] a GPU is present: the pinned batches run (see the next test)")
    with pytest.raises(stokehold.DeviceError) as e:
        stokehold.Pipeline(EVAL, builtin, batch_memory="pinned", batch=8)
    text = str(e.value)
    assert 'batch_memory = "pinned"' in text and "can't be pinned" in text and 'batch_memory = "auto"' in text


@pytest.mark.skipif(not _has_cuda(), reason="[gpu] no CUDA device for torch")
def test_on_a_gpu_pinned_batches_are_pinned_for_torch(builtin):
    import torch
    host = stokehold.Pipeline(EVAL, builtin, device="cpu", batch=8, threads=2, epochs=1)
    pinned = stokehold.Pipeline(EVAL, builtin, batch_memory="pinned", batch=8, threads=2, epochs=1)
    for a, b in zip(host, pinned):
        x = torch.from_dlpack(b["images"])
        assert x.device.type == "cpu" and x.is_pinned()
        y = x.cuda(non_blocking=True)
        del x, b  # dropped before the copy has run: the pool waits for it
        assert torch.equal(y.cpu(), torch.from_dlpack(a["images"]))

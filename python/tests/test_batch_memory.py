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
    kept = []
    for _ in range(3):
        for b in p:
            kept = (kept + [np.from_dlpack(b["images"])])[-2:]  # a consumer a step behind
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

"""PyTorch takes batches without a copy, and the ResNet-50 example runs (both variants).
Skipped, and listed as skipped with the reason, where torch is not installed."""

import gc
import subprocess
import sys

import numpy as np
import pytest

import stokehold
from conftest import REPO, TRAIN

torch = pytest.importorskip("torch", reason="[extra:torch] torch is not installed: the PyTorch checks did not run")


def test_torch_from_dlpack_is_zero_copy(builtin):
    p = stokehold.Pipeline(TRAIN, builtin, batch=16, threads=2, epochs=1)
    for b in p:
        images = torch.from_dlpack(b["images"])
        labels = torch.from_dlpack(b["labels"])
        assert images.data_ptr() == b["images"].data_ptr
        assert labels.data_ptr() == b["labels"].data_ptr
        assert images.dtype == torch.float32 and labels.dtype == torch.int64
        assert tuple(images.shape) == (len(b), 3, 224, 224) and images.is_contiguous()
        assert torch.equal(images, torch.from_numpy(np.from_dlpack(b["images"])))
        assert labels.tolist() == [s.label for s in b.samples]


def test_a_torch_tensor_keeps_its_buffer_out_of_the_pool(builtin):
    p = stokehold.Pipeline(TRAIN, builtin, batch=16, threads=2, epochs=1)
    kept = None
    for b in p:
        if b.index == 0:
            kept = torch.from_dlpack(b["images"])
            snapshot = kept.clone()
    del b
    gc.collect()
    idle = p.stats()["idle_batch_buffers"]
    assert torch.equal(kept, snapshot)
    del kept
    gc.collect()
    assert p.stats()["idle_batch_buffers"] == idle + 1


@pytest.mark.parametrize("script", ["train_resnet50.py", "train_resnet50_dataloader.py"])
def test_the_resnet50_example_trains(script):
    pytest.importorskip("torchvision", reason="[extra:torchvision] torchvision is not installed: the example did not run")
    path = REPO / "examples" / "python" / script
    run = subprocess.run([sys.executable, str(path), "--steps", "2", "--batch", "4", "--workers", "1"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "epoch 0 step 1 loss" in run.stdout, run.stdout

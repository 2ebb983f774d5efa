"""Batches reach NumPy without a copy, and a batch buffer lives as long as any array made
from it, then goes back to the pipeline's pool."""

import gc

import numpy as np

import stokehold
from conftest import TRAIN


def test_numpy_arrays_are_the_batch_buffers(builtin):
    p = stokehold.Pipeline(TRAIN, builtin, batch=16, threads=2, epochs=1)
    for b in p:
        images, labels = b["images"], b["labels"]
        a = np.from_dlpack(images)
        assert a.ctypes.data == images.data_ptr, "numpy points at the batch buffer"
        assert (a.shape, a.dtype) == ((len(b), 3, 224, 224), np.float32)
        assert images.shape == a.shape and images.layout == "NCHW"
        assert images.nbytes == a.nbytes
        l = np.from_dlpack(labels)
        assert l.dtype == np.int64 and l.ctypes.data == labels.data_ptr
        assert list(l) == [s.label for s in b.samples]
        # np.asarray goes through the same protocol.
        assert np.asarray(images).ctypes.data == images.data_ptr
        assert b["images"] is images and b[0] is images
        first, second = b
        assert (first, second) == (images, labels)


def test_a_buffer_returns_to_the_pool_only_when_the_last_array_goes(builtin):
    p = stokehold.Pipeline(TRAIN, builtin, batch=16, threads=2, epochs=1)
    kept = None
    for b in p:
        if b.index == 0:
            kept = np.from_dlpack(b["images"])
            ptr = kept.ctypes.data
            snapshot = kept.copy()
    del b
    gc.collect()
    # Every batch has been built (one epoch); all but the kept one's buffers are back.
    idle = p.stats()["idle_batch_buffers"]
    assert idle >= 1
    assert kept.ctypes.data == ptr
    assert np.array_equal(kept, snapshot), "later batches did not write into a live buffer"
    del kept
    gc.collect()
    assert p.stats()["idle_batch_buffers"] == idle + 1, "the kept buffer went back"


def test_the_tensor_outlives_its_batch_and_pipeline(builtin):
    p = stokehold.Pipeline(TRAIN, builtin, batch=8, threads=1, epochs=1)
    b = next(iter(p))
    t = b["images"]
    expected = np.from_dlpack(t).copy()
    del b, p
    gc.collect()
    a = np.from_dlpack(t)
    assert a.ctypes.data == t.data_ptr and np.array_equal(a, expected)


def test_every_export_is_its_own_capsule(builtin):
    p = stokehold.Pipeline(TRAIN, builtin, batch=8, threads=1, epochs=1)
    t = next(iter(p))["images"]
    a, b = np.from_dlpack(t), np.from_dlpack(t)
    assert a.ctypes.data == b.ctypes.data == t.data_ptr
    assert t.__dlpack_device__() == (1, 0) and t.device == "cpu"
    try:
        t.__dlpack__(copy=True)
    except BufferError as e:
        assert "zero-copy" in str(e)
    else:
        raise AssertionError("copy=True must be refused: there is no copying export")


def test_samples_of_different_shapes_are_refused_with_the_reason(builtin):
    decoded_only = {
        "pipeline": {"batch": 8, "outputs": ["images"]},
        "op": [{"kind": "file_reader", "output": "jpegs"},
               {"kind": "decode", "input": "jpegs", "output": "images"}],
    }
    t = next(iter(stokehold.Pipeline(decoded_only, builtin, threads=1)))["images"]
    assert t.shape is None and t.dtype == "uint8" and len(t) == 8
    try:
        np.from_dlpack(t)
    except BufferError as e:
        assert "differ in shape" in str(e) and "resize or crop" in str(e)
    else:
        raise AssertionError("a ragged batch has no one shape to export")

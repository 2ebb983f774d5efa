"""stokehold: image input pipelines that keep a GPU fed, from Python.

A :class:`Pipeline` runs a pipeline file (or a dict of the same structure) on its own
threads; iterating over it gives one epoch of :class:`Batch` objects, whose outputs are
:class:`Tensor` objects that frameworks take without copying::

    import stokehold, torch

    pipeline = stokehold.Pipeline("pipelines/resnet50-train.toml", "/data/train", batch=256)
    for epoch in range(90):
        for batch in pipeline:
            images = torch.from_dlpack(batch["images"])  # float32 NCHW, no copy
            labels = torch.from_dlpack(batch["labels"])  # int64

Under torchrun, each rank reads a disjoint part of every epoch (``RANK``, ``WORLD_SIZE``
and ``LOCAL_RANK`` are read from the environment), with the same number of batches on
every rank. ``state_dict()``/``load_state_dict()`` resume mid-epoch with the very batches an
uninterrupted run would have given. Errors are :class:`Error` subclasses that say what to
change.
"""

from ._errors import DataError, DeviceError, Error, OutOfMemoryError, PipelineError
from ._native import (
    Batch,
    EpochIterator,
    Pipeline,
    Sample,
    Skipped,
    Tensor,
    __version__,
    builtin_data,
)

__all__ = [
    "Batch",
    "DataError",
    "DeviceError",
    "EpochIterator",
    "Error",
    "OutOfMemoryError",
    "Pipeline",
    "PipelineError",
    "Sample",
    "Skipped",
    "Tensor",
    "__version__",
    "builtin_data",
]

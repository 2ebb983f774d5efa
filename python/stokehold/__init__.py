"""stokehold: image input pipelines that keep a GPU fed, from Python.

A :class:`Pipeline` runs a pipeline file (or a dict of the same structure) on its own
threads; iterating over it gives one epoch of :class:`Batch` objects, whose outputs are
:class:`Tensor` objects that frameworks take without copying::

    import stokehold, torch

    train = stokehold.pipelines.path("resnet50-train")  # the pipeline files shipped
    pipeline = stokehold.Pipeline(train, "/data/train", batch=256)
    for epoch in range(90):
        for batch in pipeline:
            images = torch.from_dlpack(batch["images"])  # float32 NCHW, no copy
            labels = torch.from_dlpack(batch["labels"])  # int64

Under torchrun, each rank reads a disjoint part of every epoch (``RANK``, ``WORLD_SIZE``
and ``LOCAL_RANK`` are read from the environment), with the same number of batches on
every rank. ``state_dict()``/``load_state_dict()`` resume mid-epoch with the very batches an
uninterrupted run would have given. Errors are :class:`Error` subclasses that say what to
change; what a pipeline's start finds worth telling is a :class:`DataWarning` or
:class:`PerformanceWarning`; bad files and epoch summaries are logged to the ``"stokehold"``
logger of :mod:`logging`. The command line is here too: ``stokehold ...`` or
``python -m stokehold ...``.
"""

from ._errors import (
    DataError,
    DataWarning,
    DeviceError,
    Error,
    OutOfMemoryError,
    PerformanceWarning,
    PipelineError,
)
from . import pipelines
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
    "DataWarning",
    "DeviceError",
    "EpochIterator",
    "Error",
    "OutOfMemoryError",
    "PerformanceWarning",
    "Pipeline",
    "PipelineError",
    "Sample",
    "Skipped",
    "Tensor",
    "__version__",
    "builtin_data",
    "pipelines",
]

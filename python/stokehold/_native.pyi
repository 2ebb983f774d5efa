"""Type stubs of stokehold's native module (``stokehold._native``)."""

import os
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple, Union

__version__: str

PathLike = Union[str, "os.PathLike[str]"]

def builtin_data(path: Optional[PathLike] = None) -> str:
    """The folder of the built-in demo images (generated the first time)."""

def _cli_main(args: List[Union[str, "os.PathLike[str]"]]) -> int:
    """Runs the ``stokehold`` command line (``args[0]`` is the program's name); its exit
    status."""

class Tensor:
    """One output of a batch; take it with ``torch.from_dlpack`` or ``numpy.from_dlpack``
    (no copy: the batch buffer lives as long as any array made from it)."""

    def __dlpack__(
        self,
        *,
        stream: Optional[Any] = None,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any:
        """A DLPack capsule of the tensor (no copy). For a GPU batch, ``stream`` is the
        consumer's CUDA stream (``1`` or omitted: legacy default, ``2``: per-thread default,
        ``-1``: no ordering); it waits on the device for the batch to be written."""
    def __dlpack_device__(self) -> Tuple[int, int]:
        """``(1, 0)`` for host memory (pinned batches and the emulated device's included),
        ``(2, N)`` for CUDA device N."""
    @property
    def shape(self) -> Optional[Tuple[int, ...]]:
        """``(n, c, h, w)``, ``(n, h, w, c)`` or ``(n,)``; ``None`` when samples differ."""
    @property
    def dtype(self) -> str:
        """``"uint8"``, ``"float16"``, ``"float32"`` or ``"int64"``."""
    @property
    def layout(self) -> Optional[str]:
        """``"NCHW"`` or ``"NHWC"`` for images, ``None`` for labels."""
    @property
    def device(self) -> str:
        """``"cpu"`` (host memory: pinned batches and the emulated device's included) or
        ``"cuda:N"``."""
    @property
    def pinned(self) -> bool:
        """True for host memory the GPU pinned (``batch_memory="pinned"``): a copy to the
        GPU with ``non_blocking=True`` is asynchronous."""
    def record_stream(self, stream: Any) -> None:
        """For a pinned batch copied on a CUDA stream other than the default one: its memory
        is not written again until the work queued on ``stream`` before the last reference
        goes has run (as ``torch.Tensor.record_stream``). ``stream``: a
        ``torch.cuda.Stream`` or a raw ``CUstream`` handle. Nothing to do for the default
        streams or for batches in ordinary host memory."""
    @property
    def data_ptr(self) -> int:
        """The address of the first element."""
    @property
    def nbytes(self) -> int:
        """Size of the data in bytes."""
    def numpy(self) -> Any:
        """The tensor as a NumPy array (no copy)."""
    def __array__(self, dtype: Optional[Any] = None, copy: Optional[bool] = None) -> Any: ...
    def __len__(self) -> int: ...

class Sample:
    """Who one sample of a batch is, and its random parameters."""

    path: str
    index: int
    epoch: int
    label: int
    params: Dict[str, Dict[str, Any]]
    """``{"crop": {"top", "left", "height", "width"}, "flip": {"horizontal", "vertical"},
    "color_jitter": {...}}``, as far as the pipeline has those operators."""
    padding: bool
    """A repeat that only fills the batch (or evens out the ranks' batch counts, also after
    bad files were skipped)."""

class Skipped:
    """A bad file met while filling a batch (skipped, or in ``Batch.replaced``, replaced)."""

    path: str
    index: int
    cause: str
    category: str

class Batch:
    """One batch: outputs by name or position, and who its samples are."""

    @property
    def epoch(self) -> int: ...
    @property
    def index(self) -> int: ...
    @property
    def padded(self) -> int:
        """How many of the last samples are padding."""
    @property
    def samples(self) -> List[Sample]: ...
    @property
    def skipped(self) -> List[Skipped]: ...
    @property
    def replaced(self) -> List[Skipped]: ...
    def keys(self) -> List[str]: ...
    def __getitem__(self, key: Union[str, int]) -> Tensor: ...
    def __contains__(self, name: str) -> bool: ...
    def __iter__(self) -> Iterator[Tensor]: ...
    def __len__(self) -> int: ...

class EpochIterator(Iterator[Batch]):
    """The batches of one epoch of a :class:`Pipeline`."""

    @property
    def epoch(self) -> int: ...
    def __iter__(self) -> "EpochIterator": ...
    def __next__(self) -> Batch: ...

class Pipeline:
    """An image input pipeline running on its own threads; each ``for`` loop over it is one
    epoch.

    ``device`` says which path runs it: ``"auto"`` (``cuda:LOCAL_RANK`` when the GPU path can
    run, else the CPU), ``"cpu"``, ``"cuda"`` / ``"cuda:N"``, or ``"emu"`` (the emulated
    device, a test device); ``None`` (the default) keeps the pipeline's own ``device``
    setting, ``"auto"`` unless it says otherwise. The GPU is ``"cuda:N"``'s, else
    ``LOCAL_RANK``'s under torchrun, else the pipeline's ``device_id``.

    ``batch_memory`` says where batches are handed out: ``"auto"`` (where the path makes
    them: host memory on the CPU path, the GPU on the GPU path), ``"cuda"`` / ``"cuda:N"``
    (on the GPU on either path: with ``device="cpu"`` the pipeline uploads each finished batch
    itself, asynchronously, so ``batch["images"]`` is a CUDA tensor whose consumer stream
    waits for the copy on the device, no ``pin_memory()`` or ``.cuda()`` needed; a
    ``DeviceError`` at once when there is no usable GPU), ``"emu"`` (the same upload to the
    emulated device, a test device), ``"pinned"`` (host batches of the CPU path in memory this
    rank's GPU pinned, reused from a pool, for a loop that copies them itself:
    ``torch.from_dlpack(batch["images"]).cuda(non_blocking=True)`` is an asynchronous copy,
    no ``pin_memory()`` needed; ``device="auto"`` takes the CPU path; a ``DeviceError`` at once
    when there is no usable GPU), or ``"emu-pinned"`` (the same with the emulated device's
    pinned memory, a test device)."""

    def __init__(
        self,
        pipeline: Union[PathLike, Mapping[str, Any]],
        data: Optional[PathLike] = None,
        *,
        device: Optional[str] = None,
        batch: Optional[int] = None,
        threads: Optional[int] = None,
        seed: Optional[int] = None,
        epochs: Optional[int] = None,
        prefetch: Optional[int] = None,
        on_error: Optional[str] = None,
        batch_memory: Optional[str] = None,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
    ) -> None: ...
    def __iter__(self) -> EpochIterator: ...
    def __len__(self) -> int:
        """Batches per epoch on this rank: the same on every rank, bad files or not (with
        several ranks, an epoch that skipped files cut short ends with padding batches)."""
    @property
    def epoch(self) -> int:
        """The epoch the current (or next) ``for`` loop yields."""
    @property
    def batch_size(self) -> int: ...
    @property
    def samples_per_epoch(self) -> int: ...
    @property
    def rank(self) -> int: ...
    @property
    def world_size(self) -> int: ...
    @property
    def device(self) -> str:
        """``"cpu"``, ``"gpu"`` or ``"emu"`` (the emulated device, a test device)."""
    @property
    def device_reason(self) -> str: ...
    @property
    def threads(self) -> int: ...
    @property
    def outputs(self) -> List[str]: ...
    @property
    def classes(self) -> List[str]: ...
    def state_dict(self) -> Dict[str, int]: ...
    def load_state_dict(self, state: Dict[str, int]) -> None: ...
    def stats(self) -> Dict[str, Any]: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Pipeline": ...
    def __exit__(self, *exc: Any) -> bool: ...

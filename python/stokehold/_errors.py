"""The exceptions stokehold raises: one base class, and one class per whose fault it is."""


class Error(Exception):
    """Base class of every error stokehold raises."""


class PipelineError(Error, ValueError):
    """The pipeline definition (file, dict or keyword argument) is invalid.

    For a pipeline file, ``str(e)`` starts with ``file:line:column`` and ends with a
    ``help:`` line saying what to change; the parts are also attributes: ``file``, ``line``,
    ``column``, ``message``, ``help`` (``None`` where unknown). Every problem found is
    reported at once: ``errors`` lists them, one ``PipelineError`` each (``[e]`` for one),
    ``str(e)`` shows them all and the attributes are the first one's.
    """

    file = None
    line = None
    column = None
    message = None
    help = None

    def __init__(self, *args):
        super().__init__(*args)
        self.errors = [self]


class DataWarning(UserWarning):
    """Something about the data worth knowing though the pipeline runs: a problem met while
    listing it, or labels it doesn't have (every label -1)."""


class PerformanceWarning(UserWarning):
    """Something that makes every pipeline slower: an unoptimised build of stokehold, or
    JPEG decoding without SIMD."""


class DataError(Error):
    """The data can't be used: a missing or empty folder, an unreadable list file, or (with
    ``on_error="fail"``) a bad file, whose ``path`` and ``cause`` are attributes."""

    path = None
    cause = None


class DeviceError(Error, RuntimeError):
    """The device asked for can't be used (no GPU, no CUDA driver, nvJPEG missing)."""


class OutOfMemoryError(Error, MemoryError):
    """The batches the settings ask for don't fit in memory; the message names the figures
    and what to lower."""

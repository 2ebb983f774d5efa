"""The exceptions stokehold raises: one base class, and one class per whose fault it is."""


class Error(Exception):
    """Base class of every error stokehold raises."""


class PipelineError(Error, ValueError):
    """The pipeline definition (file, dict or keyword argument) is invalid.

    For a pipeline file, ``str(e)`` starts with ``file:line:column`` and ends with a
    ``help:`` line saying what to change; the parts are also attributes: ``file``, ``line``,
    ``column``, ``message``, ``help`` (``None`` where unknown).
    """

    file = None
    line = None
    column = None
    message = None
    help = None


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

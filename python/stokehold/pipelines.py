"""The pipeline files stokehold ships, installed with the package (they live here, in
``pipeline_files/``; the repository's ``pipelines/`` is a link to them), so that they can
be named from anywhere::

    stokehold.Pipeline(stokehold.pipelines.path("resnet50-train"), "/data/train")
"""

from pathlib import Path
from typing import List

from ._errors import PipelineError

_FOLDER = Path(__file__).resolve().parent / "pipeline_files"


def names() -> List[str]:
    """The shipped pipelines, by name: ``["resnet50-eval", "resnet50-train", ...]``."""
    return sorted(p.stem for p in _FOLDER.glob("*.toml"))


def path(name: str) -> str:
    """The path of the shipped pipeline file ``name`` (``"resnet50-train"``, with or without
    ``.toml``); :class:`PipelineError` for a name not shipped."""
    stem = name[: -len(".toml")] if name.endswith(".toml") else name
    found = _FOLDER / f"{stem}.toml"
    if not found.is_file():
        shipped = ", ".join(names())
        e = PipelineError(f"no shipped pipeline is called {name!r}\n  help: use one of {shipped}")
        e.message = f"no shipped pipeline is called {name!r}"
        e.help = f"use one of {shipped}"
        raise e
    return str(found)

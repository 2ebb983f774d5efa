"""The ``stokehold`` command line from the Python package: ``stokehold check|run|bench|tune|
pack|compare ...`` (the command pip installs) or ``python -m stokehold ...``; the same
program as the Rust binary (docs/cli.md)."""

import sys

from ._native import _cli_main


def main() -> int:
    """Runs the command line with this process's arguments; returns its exit status."""
    return _cli_main(["stokehold", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())

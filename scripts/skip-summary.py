#!/usr/bin/env python3
"""The skip summary that ends the test command (scripts/test.sh; docs/testing.md).

    skip-summary.py LOG

LOG holds one line per skipped check, `kind<TAB>test<TAB>reason`, appended by the tests
(src/testutil/skip.rs for Rust, python/tests/conftest.py for pytest). Prints, as the last
lines of the test command: how many checks were skipped, grouped by reason, the tests of
each group (the first few, then a count) and what would make them run.

Exit status: 1 when the environment variable CI is set (not empty, "0" or "false") and a
check was skipped that the CI machine can run: every kind but `gpu` (a GPU machine only)
and `extra:*` (optional packages the test command does not install). 0 otherwise; 2 on bad
usage. A missing LOG is no skips.
"""

import os
import sys

# Kinds the CI machine cannot run: it has no GPU, and installs no optional extras.
CI_CANNOT_RUN = ("gpu", "extra:")
# Tests listed per reason before the rest are counted.
LISTED = 5
ORDER = ["shared-data", "nvrtc", "emu", "python:", "tool:", "no-gpu", "extra:", "gpu"]


def runs_on_ci(kind):
    return not any(kind == k or (k.endswith(":") and kind.startswith(k)) for k in CI_CANNOT_RUN)


def rank(kind):
    for i, k in enumerate(ORDER):
        if kind == k or (k.endswith(":") and kind.startswith(k)):
            return i
    return len(ORDER)


def what_runs_it(kind):
    name = kind.partition(":")[2]
    if kind == "gpu":
        return "a GPU machine (docs/gpu-machine.md)"
    if kind == "no-gpu":
        return "a machine without a GPU or nvJPEG (they check the errors given without one)"
    if kind == "shared-data":
        return "the shared data: ../shared beside the clone, or STOKEHOLD_SHARED=<folder with data/>"
    if kind == "nvrtc":
        return "the NVRTC wheel: scripts/test.sh without STOKEHOLD_NVRTC=skip (docs/testing.md)"
    if kind == "emu":
        return "a working C++ compiler when building (build.rs builds the emulated device)"
    if kind.startswith("python:"):
        return f"{name} in .dev/venv (scripts/test.sh installs it)"
    if kind.startswith("tool:"):
        return f"{name} on PATH"
    if kind.startswith("extra:"):
        if name in ("torch", "torchvision"):
            return "STOKEHOLD_TEST_TORCH=1 scripts/test.sh (installs torch and torchvision, about 5.5 GB)"
        return f".dev/venv/bin/pip install {name} (the test command does not install it)"
    return f"unknown kind '{kind}': give the skip a kind (docs/testing.md)"


def shown(test):
    """A Rust test as the cargo command that runs it; a pytest node id as it is."""
    return f"cargo test {test}" if test.startswith("--") else test


def read(path):
    entries = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                kind, _, rest = line.rstrip("\n").partition("\t")
                test, _, reason = rest.partition("\t")
                if kind and (kind, test, reason) not in entries:
                    entries.append((kind, test, reason))
    except FileNotFoundError:
        pass
    return entries


def summary(entries):
    if not entries:
        return ["skipped 0 checks: no test skipped."]
    groups = {}
    for kind, test, reason in entries:
        groups.setdefault((kind, reason), []).append(test)
    n = len(entries)
    out = [f"skipped {n} check{'s' if n != 1 else ''}:"]
    for (kind, reason), tests in sorted(groups.items(), key=lambda g: (rank(g[0][0]), g[0])):
        count = f"{len(tests)} test{'s' if len(tests) != 1 else ''}"
        out.append(f"  [{kind}] {reason} ({count})")
        out.extend(f"      {shown(t)}" for t in tests[:LISTED])
        if len(tests) > LISTED:
            out.append(f"      ... and {len(tests) - LISTED} more")
        out.append(f"    to run: {what_runs_it(kind)}")
    return out


def main(argv):
    if len(argv) != 2 or argv[1].startswith("-"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    entries = read(argv[1])
    lines = summary(entries)
    could = sum(1 for kind, _, _ in entries if runs_on_ci(kind))
    on_ci = os.environ.get("CI", "").lower() not in ("", "0", "false")
    if on_ci and could:
        lines.append(f"CI: {could} of the skipped checks can run on the CI machine "
                     "(every kind but gpu and extra): failing")
    elif could:
        lines.append(f"({could} of them can run on the CI machine, where a skip fails the run)")
    print("\n".join(lines))
    return 1 if on_ci and could else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

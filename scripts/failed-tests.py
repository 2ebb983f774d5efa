#!/usr/bin/env python3
"""The tests that failed in a run of scripts/test.sh, from its log, each as the command that
runs it alone (docs/testing.md), so that they are the last lines a reader sees rather than
hundreds of lines up.

    python3 scripts/failed-tests.py LOG

LOG holds the output of `cargo test` (stdout and stderr together) and of pytest `-rfE`.
Prints nothing when nothing failed; otherwise, e.g.

    failed 2 tests:
      cargo test-release --lib pipeline::run::tests::a_test
      cargo test-release --test shards a_truncated_shard_is_counted
    and: the build of a test target failed (error[E0425] above)
"""

import re
import sys

RUNNING = re.compile(r"^\s+Running (?:unittests )?(\S+)")
DOC_TESTS = re.compile(r"^\s+Doc-tests (\S+)")
RERUN = re.compile(r"to rerun pass `([^`]+)`")
PYTEST = re.compile(r"^(FAILED|ERROR) (\S+)")


def target_of(source: str) -> str:
    """The `cargo test` selector of a test binary, from the source file cargo names."""
    if source == "src/lib.rs":
        return "--lib"
    m = re.match(r"(tests|benches|examples)/([^/]+?)(?:/main)?\.rs$", source)
    if m:
        kind = {"tests": "--test", "benches": "--bench", "examples": "--example"}[m.group(1)]
        return f"{kind} {m.group(2)}"
    m = re.match(r"src/bin/([^/]+?)(?:/main)?\.rs$", source)
    if m:
        return f"--bin {m.group(1)}"
    return source


def failures(lines):
    """(commands of the failed tests, other failures in words)."""
    failed, other = [], []
    target = None
    named = set()
    in_list = False
    for line in lines:
        line = line.rstrip("\n")
        if m := RUNNING.match(line):
            target, in_list = target_of(m.group(1)), False
            continue
        if DOC_TESTS.match(line):
            target, in_list = "--doc", False
            continue
        if line == "failures:":
            in_list = True
            continue
        if in_list:
            if line.startswith("    ") and not line.startswith("    ----"):
                name = line.strip()
                if target == "--doc":
                    # `src/x.rs - path::Item (line 12)`: the item's path selects it.
                    name = name.split(" - ", 1)[-1].split(" (line")[0]
                failed.append(f"cargo test-release {target} {name}")
                named.add(target)
            elif line.startswith("---- ") or line.startswith("test result:"):
                in_list = False
            continue
        if m := RERUN.search(line):
            if m.group(1) not in named:
                other.append(f"the test binary `{m.group(1)}` failed without naming a test (see above)")
            continue
        if line.startswith("error: could not compile") or line.startswith("error[E"):
            if not any(o.startswith("the build") for o in other):
                other.append(f"the build of a test target failed ({line.strip()[:60]} above)")
            continue
        if m := PYTEST.match(line):
            failed.append(f".dev/venv/bin/python -m pytest {m.group(2)}")
    return list(dict.fromkeys(failed)), other


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
            failed, other = failures(f)
    except FileNotFoundError:
        return 0
    if failed:
        s = "" if len(failed) == 1 else "s"
        print(f"failed {len(failed)} test{s}:")
        for f in failed:
            print(f"  {f}")
    for o in other:
        print(f"{'and: ' if failed else 'failed: '}{o}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

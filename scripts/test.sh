#!/usr/bin/env bash
# The test command (README): builds and runs every test. Tests that need ../shared/data
# say "skipped" when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --all-targets "$@"
cargo test --doc "$@"

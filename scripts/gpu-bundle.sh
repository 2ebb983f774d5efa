#!/usr/bin/env bash
# Builds everything a GPU machine without a Rust toolchain needs to test stokehold, into one
# folder (default .dev/gpu-bundle/, under 60 MB), then run scripts/gpu-check.sh there.
#
#   scripts/gpu-bundle.sh [OUT_DIR]
#
# Contents:
#   tests/<target>      every test executable of `cargo test --release --no-run`, named by its
#                       target ("lib" for the library's unit tests, else the tests/<name>.rs name)
#   bin/stokehold       the CLI (cargo build --release)
#   pipelines/          the pipeline files
#   gpu-check.sh        the runner (copied from scripts/)
#   MANIFEST            git revision, build date, rustc version, file sizes
#
# Binaries are stripped of debug info (the release profile keeps line tables) to stay small;
# symbols stay, so panics still name functions. Binaries built here (glibc 2.36) run on the
# GPU machines. Nothing CUDA is linked: nvJPEG and the driver are opened at run time.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/.dev/gpu-bundle}"
limit_mb=60
cd "$root"

for tool in cargo jq strip; do
    command -v "$tool" >/dev/null || { echo "error: $tool not found" >&2; exit 1; }
done

echo "==> building test executables (release)" >&2
json="$(mktemp)"
trap 'rm -f "$json"' EXIT
cargo test --release --no-run --message-format=json >"$json"
echo "==> building the CLI (release)" >&2
cargo build --release --bin stokehold --message-format=json >>"$json"

rm -rf "$out"
mkdir -p "$out/tests" "$out/bin"

# One line per test executable: "<kind> <target name> <path>".
jq -r 'select(.reason == "compiler-artifact" and .profile.test == true and .executable != null)
       | "\(.target.kind[0]) \(.target.name) \(.executable)"' "$json" |
    sort -u |
    while read -r kind name exe; do
        case "$kind" in
            lib) dest="lib" ;;
            bin) dest="bin-$name" ;;
            *) dest="$name" ;;
        esac
        cp "$exe" "$out/tests/$dest"
        strip --strip-debug "$out/tests/$dest"
        echo "    tests/$dest  ($kind $name)" >&2
    done

cli="$(jq -r 'select(.reason == "compiler-artifact" and .target.name == "stokehold"
              and (.target.kind | index("bin")) and .profile.test == false and .executable != null)
              | .executable' "$json" | tail -n1)"
if [[ -z "$cli" || ! -x "$cli" ]]; then
    echo "error: the stokehold CLI was not built" >&2
    exit 1
fi
cp "$cli" "$out/bin/stokehold"
strip --strip-debug "$out/bin/stokehold"
cp -r pipelines "$out/pipelines"
cp scripts/gpu-check.sh "$out/gpu-check.sh"
chmod +x "$out/gpu-check.sh"

{
    echo "revision: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (dirty)')"
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "rustc: $(rustc --version)"
    echo "files:"
    (cd "$out" && find . -type f ! -name MANIFEST -printf '  %p %s\n' | sort)
} >"$out/MANIFEST"

size_mb=$(( $(du -sb "$out" | cut -f1) / 1024 / 1024 ))
echo "==> $out: ${size_mb} MB" >&2
if (( size_mb >= limit_mb )); then
    echo "error: the bundle is ${size_mb} MB, over ${limit_mb} MB" >&2
    exit 1
fi
echo "run on the GPU machine:  gpu-check.sh <bundle folder> <shared folder> [bench image folder]" >&2

#!/usr/bin/env bash
# Builds what a GPU machine without a Rust toolchain needs to check stokehold, into one
# git-ignored folder (default .gpu/) that the device tool carries (`carry: [".gpu"]`), then
# checks that it and the working tree that travels with it stay under the 64 MiB a call takes.
#
#   scripts/gpu-bundle.sh [--out DIR] [--shared DIR] [--images N] [--nvjpeg LIB]
#
#   --out DIR      the bundle folder (default .gpu; must be git-ignored to be carried)
#   --shared DIR   the shared folder with data/imagenet-400 and data/jpeg-edge (../shared)
#   --images N     photos of imagenet-400 to take (default 100: every photo of an unusual
#                  kind, gray and 4:2:2/4:4:0, then an even spread of the rest)
#   --nvjpeg LIB   also carry this libnvjpeg.so.13 (about 6 MB, e.g. from the nvidia-nvjpeg
#                  wheel) as lib/, for a machine whose CUDA has none; gpu-check.sh uses it
#                  only when it finds no other
#
# Contents:
#   tests/lib            the library's unit tests (cargo test --release --lib), stripped: every
#                        CUDA, nvJPEG and GPU parity test and the GPU stage's real-device
#                        tests (tests/*.rs stay behind: they run a build-machine path)
#   bin/stokehold        the CLI (release), stripped
#   pipelines/           the pipeline files
#   kernels/*.cu         the kernel sources (a test holds the kernel table against them)
#   shared/data/imagenet-400/  the photo subset (named as the tests expect it)
#   shared/data/jpeg-edge/     the edge cases (CMYK, arithmetic, 12-bit, EXIF, ...)
#   gpu-check.sh         the runner (scripts/gpu-check.sh)
#   MANIFEST             git revision, build date, rustc, what was selected, file sizes
#
# Binaries built here (glibc 2.36) run on the GPU machines; nothing CUDA is linked (the
# driver, NVRTC and nvJPEG are opened at run time). Symbols stay, so panics name functions.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/.gpu"
shared="$root/../shared"
images=100
nvjpeg=""
limit_mib=64
while (($#)); do
    case "$1" in
        --out) out="$2"; shift 2 ;;
        --shared) shared="$2"; shift 2 ;;
        --images) images="$2"; shift 2 ;;
        --nvjpeg) nvjpeg="$2"; shift 2 ;;
        *) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    esac
done
cd "$root"
for tool in cargo jq strip python3 git; do
    command -v "$tool" >/dev/null || { echo "error: $tool not found" >&2; exit 1; }
done
[[ -d "$shared/data/imagenet-400" && -d "$shared/data/jpeg-edge" ]] ||
    { echo "error: $shared/data/{imagenet-400,jpeg-edge} not found (--shared DIR)" >&2; exit 1; }
case "$out" in /*) ;; *) out="$root/$out" ;; esac
rel="${out#"$root"/}"
if [[ "$rel" != "$out" ]] && ! git check-ignore -q "$rel/MANIFEST"; then
    echo "error: $rel is not git-ignored, so the device tool would send it with the tree" \
        "(and could not carry it)" >&2
    exit 1
fi

json="$(mktemp)"
trap 'rm -f "$json"' EXIT
echo "==> building the library's unit tests and the CLI (release)" >&2
cargo test --release --lib --no-run --message-format=json >"$json"
cargo build --release --bin stokehold --message-format=json >>"$json"
lib_tests="$(jq -r 'select(.reason == "compiler-artifact" and .profile.test == true
                    and .target.kind[0] == "lib" and .executable != null) | .executable' "$json" | tail -n1)"
cli="$(jq -r 'select(.reason == "compiler-artifact" and .target.name == "stokehold"
              and (.target.kind | index("bin")) and .profile.test == false
              and .executable != null) | .executable' "$json" | tail -n1)"
[[ -x "$lib_tests" && -x "$cli" ]] || { echo "error: the test binary or the CLI was not built" >&2; exit 1; }

rm -rf "$out"
mkdir -p "$out/tests" "$out/bin" "$out/shared/data"
strip --strip-debug -o "$out/tests/lib" "$lib_tests"
strip --strip-debug -o "$out/bin/stokehold" "$cli"
cp -rL pipelines "$out/pipelines"
mkdir -p "$out/kernels" && cp kernels/*.cu "$out/kernels/"   # a test lists them
if [[ -n "$nvjpeg" ]]; then
    mkdir -p "$out/lib"
    cp -L "$nvjpeg" "$out/lib/$(basename "$nvjpeg" | sed 's/\(\.so\.[0-9]*\).*/\1/')"
fi
cp scripts/gpu-check.sh "$out/gpu-check.sh"
chmod +x "$out/gpu-check.sh"
cp -r "$shared/data/jpeg-edge" "$out/shared/data/jpeg-edge"
[[ -f "$shared/data/README.md" ]] && cp "$shared/data/README.md" "$out/shared/data/"

# The photo subset: every photo of an unusual kind (gray, chroma sampling other than 4:4:4
# and 4:2:0, progressive, ...), then an even spread of the others, by name order.
selection="$(python3 - "$shared/data/imagenet-400" "$images" <<'EOF'
import os, struct, sys
folder, want = sys.argv[1], int(sys.argv[2])

def kind(path):
    b = open(path, "rb").read()
    i = 2
    while i + 4 <= len(b):
        if b[i] != 0xFF:
            i += 1
            continue
        m = b[i + 1]
        if m in (0xD8, 0x01, 0xFF) or 0xD0 <= m <= 0xD7:
            i += 2 if m != 0xFF else 1
            continue
        n = struct.unpack(">H", b[i + 2:i + 4])[0]
        if 0xC0 <= m <= 0xCF and m not in (0xC4, 0xC8, 0xCC):
            comps = b[i + 9]
            sampling = tuple(b[i + 11 + 3 * k] for k in range(comps))
            return (m, comps, sampling)
        i += 2 + n
    return None

files = sorted(f for f in os.listdir(folder) if os.path.isfile(os.path.join(folder, f)))
kinds = {f: kind(os.path.join(folder, f)) for f in files}
counts = {}
for k in kinds.values():
    counts[k] = counts.get(k, 0) + 1
common = sorted(counts, key=lambda k: -counts[k])[:2]
rare = [f for f in files if kinds[f] not in common]
rest = [f for f in files if kinds[f] in common]
room = max(0, want - len(rare))
step = max(1, len(rest) / room) if room else len(rest) + 1
spread = [rest[int(k * step)] for k in range(min(room, len(rest)))]
for f in sorted(rare + spread)[:max(want, len(rare))]:
    print(f)
EOF
)"
mkdir -p "$out/shared/data/imagenet-400"
n=0
while read -r f; do
    [[ -n "$f" ]] || continue
    cp "$shared/data/imagenet-400/$f" "$out/shared/data/imagenet-400/"
    n=$((n + 1))
done <<<"$selection"

{
    echo "revision: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (dirty)')"
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "rustc: $(rustc --version)"
    echo "imagenet-400: $n of $(find "$shared/data/imagenet-400" -maxdepth 1 -type f | wc -l) photos (every unusual kind, then an even spread)"
    echo "files:"
    (cd "$out" && find . -type f ! -name MANIFEST -printf '  %p %s\n' | sort)
} >"$out/MANIFEST"

# What one device-tool call sends: the working tree (tracked and untracked-not-ignored files)
# plus the carried bundle.
tree_bytes=$(git ls-files -z --cached --others --exclude-standard |
    xargs -0 -r stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
bundle_bytes=$(du -sb "$out" | cut -f1)
total=$((tree_bytes + bundle_bytes))
mib() { awk -v b="$1" 'BEGIN {printf "%.1f", b / 1048576}'; }
echo "==> $rel: $(mib "$bundle_bytes") MiB (tests/lib $(mib "$(stat -c %s "$out/tests/lib")")," \
    "bin/stokehold $(mib "$(stat -c %s "$out/bin/stokehold")"), $n photos" \
    "$(mib "$(du -sb "$out/shared/data/imagenet-400" | cut -f1)"), jpeg-edge" \
    "$(mib "$(du -sb "$out/shared/data/jpeg-edge" | cut -f1)")); working tree $(mib "$tree_bytes") MiB;" \
    "one call sends $(mib "$total") MiB of $limit_mib" >&2
if ((total > limit_mib * 1048576)); then
    echo "error: over the device tool's $limit_mib MiB; use fewer --images" >&2
    exit 1
fi
echo "next: copy $rel to the GPU machine and run its gpu-check.sh there (docs/gpu-machine.md)" >&2

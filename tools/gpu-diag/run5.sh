#!/usr/bin/env bash
# For the next GPU call: the decode operator's `upsampling = "nearest"` (chroma repeated over
# each block, as the JPEG engines write it and DALI's GPU decoder outputs by default) against
# the default "fancy" (nvJPEG interpolating: about 3x the host time per image, docs/gpu.md,
# Chroma), so that our GPU figures and DALI's 19.3k img/s are compared like for like.
# Carries .gpu/ (scripts/gpu-bundle.sh --images 200, built from a tree that has `upsampling`)
# and, for (d), .diag/ with a fresh stokehold wheel (`pip wheel --no-deps
# --no-build-isolation -w .diag .`); DALI where a previous call left it importable in /tmp/site
# (../shared/peers/README.md, "DALI on the GPU machine"), in .gpu/dali (an unpacked site, or
# wheels) or on PYTHONPATH. In order, each step under `timeout` and within a budget for the
# whole call (RUN5_BUDGET seconds, default 560), its log under $OUT:
#   (a) `stokehold compare --devices cpu,gpu` on the bundle's imagenet-400 photos, train and
#       eval pipelines with upsampling = "nearest", then the train pipeline's chroma rebuilt
#       (STOKEHOLD_CHROMA_REBUILD=1): the verdict lines;
#   (b) speed, alternated twice: `stokehold bench --device gpu --stats` on the f16 train
#       pipeline over /tmp/d4k (the photos hard-linked 20 times), nearest then fancy: the
#       throughput, `decoders:` and `kernels (device)` lines;
#   (c) DALI's GPU pipeline (dali_upsampling.py) on /tmp/d4k, jpeg_fancy_upsampling False then
#       True, where nvidia.dali is importable;
#   (d) the training benchmark (examples/python/bench_training.py --mode gpu --upsampling
#       nearest --steps 40): synthetic, stokehold-gpu, stokehold-cpu (uploaded by the pipeline),
#       stokehold-cpu-pinned, dataloader (and
#       dali where importable).
set -u
BUDGET="${RUN5_BUDGET:-560}"
HERE=tools/gpu-diag
# shellcheck source=tools/gpu-diag/lib.sh
source "$HERE/lib.sh" run5

say machine
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
echo "cores $(nproc); bundle: $(head -n2 "$G/MANIFEST" | tr '\n' ' ')"
with_upsampling "$G/pipelines/resnet50-train.toml" nearest /tmp/train-nearest.toml
with_upsampling "$G/pipelines/resnet50-eval.toml" nearest /tmp/eval-nearest.toml
sed 's/dtype = "f32"/dtype = "f16"/' "$G/pipelines/resnet50-train.toml" > /tmp/train16.toml
with_upsampling /tmp/train16.toml nearest /tmp/train16-nearest.toml
with_upsampling /tmp/train16.toml fancy /tmp/train16-fancy.toml
if ! "$S" check /tmp/train16-nearest.toml > "$O/check-nearest.log" 2>&1; then
    cat "$O/check-nearest.log"
    echo "error: $S does not know upsampling: rebuild the bundle (scripts/gpu-bundle.sh --images 200)"
    exit 1
fi

say "(a) compare cpu,gpu with upsampling = \"nearest\" ($(find "$P" -maxdepth 1 -type f | wc -l) photos)"
for which in train eval; do
    log="$O/compare-$which-nearest.log"
    timed 90 "$S" compare "/tmp/$which-nearest.toml" --data "$P" --devices cpu,gpu > "$log" 2>&1
    echo "rc=$? $which (nearest): $(grep -E '^compared ' "$log")"
    # The table of outputs (from its header on: one verdict per row), then the verdict.
    sed -n '/^output /,$p' "$log" | sed 's/^/  /'
    grep -q '^output ' "$log" || tail -n 3 "$log"
done
# The rebuilt chroma gave 5 dB from the second batch on (2026-11-26): the decode areas were
# reused in stream order, which the JPEG engines don't keep (docs/gpu.md). Guarded since.
log="$O/compare-train-rebuild.log"
STOKEHOLD_CHROMA_REBUILD=1 timed 90 "$S" compare "$G/pipelines/resnet50-train.toml" --data "$P" \
    --devices cpu,gpu > "$log" 2>&1
echo "rc=$? train (fancy, rebuilt by the kernels): $(grep -E '^compared ' "$log")"
sed -n '/^output /,$p' "$log" | sed 's/^/  /'

say "(b) speed: nearest against fancy (d4k: the photos x 20, batch 256, f16), two rounds"
make_d4k
for r in 1 2; do
    for u in nearest fancy; do
        log="$O/bench-$u-$r.log"
        timed 40 "$S" bench "/tmp/train16-$u.toml" --data /tmp/d4k --device gpu --batch 256 --epochs 3 \
            --stats > "$log" 2>&1
        echo "round $r upsampling=$u rc=$? $(grep -E 'throughput=' "$log" | tail -n1)"
        grep -E 'decoders:|kernels \(device\)' "$log" | sed "s/^ */  $u: /"
    done
done

say "(c) DALI's GPU pipeline, jpeg_fancy_upsampling False / True"
# DALI's wheels from .gpu/dali (unpacked, or wheels to install), then whatever is importable.
if [[ -d "$G/dali" ]] && compgen -G "$G/dali/*.whl" > /dev/null; then
    timed 120 python3 -m pip install -q --no-index --no-deps --target /tmp/site "$G"/dali/*.whl
fi
DALI=""
for cand in "$G/dali" /tmp/site "${PYTHONPATH:-}"; do
    [[ -n "$cand" ]] || continue
    if PYTHONPATH="$cand" python3 -c 'import nvidia.dali' 2> /dev/null; then DALI="$cand"; break; fi
done
if [[ -n "$DALI" ]]; then
    echo "nvidia.dali $(PYTHONPATH="$DALI" python3 -c 'import nvidia.dali as d; print(d.__version__)') from $DALI"
    for u in nearest fancy; do
        PYTHONPATH="$DALI" timed 60 python3 "$HERE/dali_upsampling.py" /tmp/d4k --upsampling "$u" \
            --batch 256 --epochs 5 > "$O/dali-$u.log" 2>&1
        echo "rc=$? $(grep -E 'throughput=' "$O/dali-$u.log" | tail -n1)"
        grep -E 'throughput=' "$O/dali-$u.log" > /dev/null || tail -n 3 "$O/dali-$u.log"
    done
else
    echo "DALI is absent: nvidia.dali is importable from none of $G/dali, /tmp/site, PYTHONPATH"
fi

say "(d) training benchmark, upsampling nearest"
install_wheel
PY_PATH="$SITE${DALI:+:$DALI}${PYTHONPATH:+:$PYTHONPATH}"
if PYTHONPATH="$PY_PATH" python3 -c 'import stokehold' 2> /dev/null; then
    loaders=synthetic,stokehold-gpu,stokehold-cpu,stokehold-cpu-pinned,dataloader${DALI:+,dali}
    PYTHONPATH="$PY_PATH" timed 240 python3 examples/python/bench_training.py --mode gpu --data /tmp/d4k \
        --upsampling nearest --loaders "$loaders" --steps 40 > "$O/training.log" 2>&1
    echo "rc=$?"
    grep -E '^mode=|^loader=' "$O/training.log"
else
    echo "skipped: no stokehold Python package (put a fresh wheel in $D/ and carry it)"
fi
say "done"

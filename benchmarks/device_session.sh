#!/usr/bin/env bash
# One call on the lent H200 that validates and measures: GPU tests,
# compute-sanitizer memcheck and racecheck, the benchmarks, the training
# step; logs under $OUT (the device tool brings back only a handful of files:
# each mode writes at most 6). Run from the repo root there, with
# nurec_ops/_C.abi3.so built here and carried (see README: the library built
# on that machine's own toolchain crashed on errors).
#
#   bash benchmarks/device_session.sh [all|quick|bench|train]
#     quick: GPU tests + sanitizers (~3 min); bench: the op benchmarks
#     (~4 min); all (default): both; train: benchmarks/bench_train_step.py
#     (300 steps x 3 configurations, ~2.5 min) and its diagnosis traces.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
OUT=${OUT:-/tmp/nurec_out}
MODE=${1:-all}
mkdir -p "$OUT"
step() { echo; echo "=== $*"; }
quiet() { grep -v -i "warn\|cap = pol\|set_sync_debug_mode"; }

if [ "$MODE" = all ] || [ "$MODE" = quick ]; then
    step "GPU tests"
    # the whole log stays under $OUT; the summary (failures named) is printed
    timeout ${GPU_TESTS_TIMEOUT:-300} python3 -m pytest -q -m gpu -rfE --tb=short -p no:cacheprovider tests \
        > "$OUT/gpu_tests_full.log" 2>&1
    grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/gpu_tests_full.log" | tail -20

    step "compute-sanitizer memcheck / racecheck (small GPU parity tests of every op)"
    SMALL="tests/test_collect.py tests/test_track_poses.py tests/test_rasterize_camera.py tests/test_rasterize_lidar.py"
    for tool in memcheck racecheck; do
        timeout ${SANITIZER_TIMEOUT:-120} compute-sanitizer --tool $tool --print-limit 5 python3 -m pytest -q -m gpu \
            -p no:cacheprovider $SMALL -k "parity and not big and not full" 2>&1 | tail -3
    done | tee "$OUT/sanitizers.log"
fi

if [ "$MODE" = all ] || [ "$MODE" = bench ]; then
    step "benchmarks"
    timeout ${BENCH_TIMEOUT:-200} python3 benchmarks/bench_collect.py 2>&1 | quiet | tee "$OUT/bench_collect.log"
    NUREC_OPS_PDL=1 timeout 90 python3 benchmarks/bench_collect.py --no-compile 2>&1 | quiet > "$OUT/bench_collect_pdl.log"
    grep -E "nurec_ops|kernel durations" "$OUT/bench_collect_pdl.log"
    timeout ${BENCH_TIMEOUT:-200} python3 benchmarks/bench_rasterize_camera.py 2>&1 | quiet | tee "$OUT/bench_camera.log"
    timeout ${BENCH_TIMEOUT:-200} python3 benchmarks/bench_rasterize_lidar.py --kernels 2>&1 | quiet \
        | tee "$OUT/bench_lidar.log"
fi

if [ "$MODE" = train ]; then
    step "training step: baseline / fused / fused + graph"
    timeout ${TRAIN_TIMEOUT:-400} python3 benchmarks/bench_train_step.py --steps 300 --out /tmp/bench_train \
        > "$OUT/train_step.log" 2>&1
    tail -8 "$OUT/train_step.log"
    for c in baseline fused graph; do
        gzip -c /tmp/bench_train/$c/diagnose_trace.json > "$OUT/$c.trace.json.gz" 2>/dev/null
    done
fi
true

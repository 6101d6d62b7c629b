#!/usr/bin/env bash
# One call on the lent H200 that builds, validates and measures, logs under
# $OUT (the device tool brings back only a handful of files). Run from the
# repo root there; the library is built on that machine as a user would
# (pip install --no-build-isolation -e ., its own compilers), never carried.
#
#   bash benchmarks/device/device_session.sh [all|quick|bench|train|rig]
#     quick: build, bad-input suite, GPU tests, sanitizers on the tests
#     marked sanitize (SAN_FILES=... narrows the files, SAN_K=... selects
#     by -k instead); bench: vs_gsplat (carry .whl and .gsplat_chunks), the
#     lidar benchmark, bench_meta, the binning ways and a garden call's host
#     time; all (default): both; train: the training step.
#     rig: benchmarks/bench_rig_step.py (RIG_SWEEP=1: and its sweep).
#     TRAINERS=1 (any mode): also gsplat's trainers loop with gsplat and
#     with nurec_ops (DefaultStrategy, absgrad, MCMC), train_street's
#     densifying runs and bench_meta.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD NUREC_OPS_SHARED_DATA=$PWD/.shared_data
OUT=${OUT:-/tmp/nurec_out}
MODE=${1:-all}
mkdir -p "$OUT"
step() { echo; echo "=== $*"; }
quiet() { grep -v -i "warn\|cap = pol\|set_sync_debug_mode"; }

step "build (pip install --no-build-isolation -e ., this machine's compilers)"
start=$(date +%s)
MAX_JOBS=${MAX_JOBS:-16} python3 -m pip install -q --no-build-isolation --no-deps -e . > "$OUT/build.log" 2>&1
echo "rc=$? in $(( $(date +%s) - start )) s"; tail -3 "$OUT/build.log"
if [ "$MODE" = all ] || [ "$MODE" = bench ] || [ "$MODE" = rig ] || [ -n "${TRAINERS:-}" ]; then
    (source benchmarks/device/peer_gsplat.sh > /tmp/gsplat_setup.log 2>&1) &  # unpacks the carried peer meanwhile
    GS=$!
fi

if [ "$MODE" = all ] || [ "$MODE" = quick ]; then
    step "bad inputs on this build (CPU and CUDA tensors)"
    timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_errors.py 2>&1 | tail -3
    step "a scene past 2^31 tile intersections (~60 GB)"
    NUREC_TEST_HUGE=1 timeout 150 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider tests/test_big_scene.py 2>&1 | tail -3
    step "GPU tests (GPU_SHARDS processes, benchmarks/device/gpu_tests.sh)"
    OUT="$OUT" bash benchmarks/device/gpu_tests.sh ${GPU_SHARDS:-4} ${GPU_TESTS_TIMEOUT:-330} tests
    # the small GPU cases marked `sanitize` (pyproject.toml's markers) by
    # default; SAN_FILES narrows the files; SAN_K selects by -k instead (in
    # SAN_FILES, or the rasterizers', real inputs' and fuzz files as before)
    if [ -n "${SAN_K:-}" ]; then
        SEL=(-m gpu -k "$SAN_K")
        SMALL=${SAN_FILES:-"tests/test_rasterize_camera.py tests/test_rasterize_lidar.py tests/test_real_inputs.py tests/test_fuzz.py"}
    else
        SEL=(-m "gpu and sanitize")
        SMALL=${SAN_FILES:-tests}
    fi
    step "compute-sanitizer memcheck / racecheck (${SAN_K:-the tests marked sanitize} in $SMALL)"
    for tool in memcheck racecheck; do
        echo "-- $tool"
        timeout ${SANITIZER_TIMEOUT:-150} compute-sanitizer --tool $tool --print-limit 5 python3 -m pytest -q \
            "${SEL[@]}" -p no:cacheprovider $SMALL 2>&1 | tail -3
    done | tee "$OUT/sanitizers.log"
fi

if [ -n "${EXTRA_TESTS:-}" ]; then
    step "extra GPU tests: $EXTRA_TESTS"
    timeout 200 python3 -m pytest -q -m gpu -rfE --tb=short -p no:cacheprovider $EXTRA_TESTS 2>&1 | tail -15
fi
if [ -n "${RACECHECK_K:-}" ]; then
    step "compute-sanitizer racecheck: $RACECHECK_K"
    timeout ${SANITIZER_TIMEOUT:-200} compute-sanitizer --tool racecheck --print-limit 5 python3 -m pytest -q -m gpu \
        -p no:cacheprovider tests/test_rasterize_camera.py tests/test_rasterize_lidar.py tests/test_real_inputs.py \
        -k "$RACECHECK_K" 2>&1 | tail -3 | tee "$OUT/racecheck.log"
fi

if [ "$MODE" = all ] || [ "$MODE" = bench ]; then
    step "benchmarks: vs gsplat (same process, interleaved), lidar"
    wait $GS; tail -2 /tmp/gsplat_setup.log
    (export PYTHONPATH=/tmp/site:$PYTHONPATH
     timeout ${BENCH_TIMEOUT:-240} python3 benchmarks/vs_gsplat.py 2>&1 | quiet | tee "$OUT/vs_gsplat.log")
    timeout ${BENCH_TIMEOUT:-200} python3 benchmarks/bench_rasterize_lidar.py 2>&1 | quiet | tee "$OUT/bench_lidar.log"
    timeout ${BENCH_TIMEOUT:-200} python3 benchmarks/bench_meta.py 2>&1 | quiet | tee "$OUT/bench_meta.log"
    step "the camera's binning ways (depth keys, tile keys, the default's rule), host time of a garden call"
    timeout ${BENCH_TIMEOUT:-200} python3 benchmarks/device/bench_binning.py 2>&1 | quiet | tee "$OUT/binning.log"
    (export PYTHONPATH=/tmp/site:$PYTHONPATH
     timeout ${BENCH_TIMEOUT:-200} python3 benchmarks/device/host_profile.py --only garden --top 40 \
         > "$OUT/host_profile.log" 2>&1)
    grep -E "host .* per fwd" "$OUT/host_profile.log"
fi

if [ -n "${TRAINERS:-}" ]; then
    step "trainers: a gsplat-style loop with gsplat, then with nurec_ops (one import)"
    wait $GS 2>/dev/null; tail -1 /tmp/gsplat_setup.log
    for size in "--n 20000 --width 640 --height 480" "--n 200000 --width 1280 --height 960"; do
        for s in default "default --absgrad" mcmc; do
            echo "-- $size --strategy $s"
            PYTHONPATH=/tmp/site:$PYTHONPATH timeout ${SWAP_TIMEOUT:-120} python3 examples/gsplat_trainer_swap.py \
                --steps ${SWAP_STEPS:-1000} $size --cameras 8 --strategy $s 2>&1 | quiet
        done
    done | tee "$OUT/trainer_swap.log"
    echo "-- host time by op (small scene, default strategy)"
    PYTHONPATH=/tmp/site:$PYTHONPATH timeout 120 python3 examples/gsplat_trainer_swap.py --steps 200 --n 20000 \
        --width 640 --height 480 --cameras 8 --profile 2>&1 | quiet > "$OUT/trainer_swap_profile.log"
    grep -E "^---|Self CPU time total|Self CUDA time total" "$OUT/trainer_swap_profile.log"
    step "train_street (large) densifying with gsplat's strategies, SH ramp to 3"
    for s in none default mcmc; do
        echo "-- --strategy $s"
        PYTHONPATH=/tmp/site:$PYTHONPATH timeout ${STREET_TIMEOUT:-150} python3 examples/train_street.py --fused \
            --strategy $s --sh-degree 3 --steps ${STREET_STEPS:-600} --quiet --out /tmp/ts_$s 2>&1 | quiet | tail -10
    done | tee "$OUT/train_street_strategy.log"
    step "bench_meta"
    timeout ${BENCH_TIMEOUT:-200} python3 benchmarks/bench_meta.py 2>&1 | quiet | tee "$OUT/bench_meta.log"
fi

if [ "$MODE" = rig ]; then
    step "the rig step: 5 cameras + lidar, 2M Gaussians; ours, graph, gsplat's cameras; then the sweep"
    wait $GS 2>/dev/null
    PYTHONPATH=/tmp/site:$PYTHONPATH timeout ${RIG_TIMEOUT:-300} python3 benchmarks/bench_rig_step.py --graph --gsplat \
        ${RIG_SWEEP:+--sweep} 2>&1 | quiet | tee "$OUT/rig_step.log"
fi

if [ "$MODE" = train ]; then
    step "training step: baseline / fused / fused + graph"
    timeout ${TRAIN_TIMEOUT:-400} python3 benchmarks/bench_train_step.py --steps 300 --out /tmp/bench_train \
        > "$OUT/train_step.log" 2>&1
    tail -8 "$OUT/train_step.log"
fi
true

#!/usr/bin/env bash
# One call on the lent H200 that validates and measures everything: GPU
# tests, compute-sanitizer memcheck and racecheck, and every benchmark, with
# the logs under $OUT (the device tool brings them back). Run from the repo
# root there, with nurec_ops/_C.abi3.so built here and carried (see README:
# the library built on that machine's own toolchain crashed on errors).
#
#   bash benchmarks/device_session.sh [quick|bench]   # quick: tests + sanitizers only; bench: benchmarks only
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
OUT=${OUT:-/tmp/nurec_out}
mkdir -p "$OUT"
step() { echo; echo "=== $*"; }

if [ "${1:-}" != bench ]; then
step "GPU tests"
# The whole log stays under $OUT; the summary (failures named) is printed.
timeout ${GPU_TESTS_TIMEOUT:-300} python3 -m pytest -q -m gpu -rfE --tb=short -p no:cacheprovider tests \
    > "$OUT/gpu_tests_full.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/gpu_tests_full.log" | tail -40 | tee "$OUT/gpu_tests.log"

step "compute-sanitizer memcheck / racecheck (small GPU tests of every op)"
SMALL="tests/test_collect.py tests/test_track_poses.py tests/test_rasterize_camera.py"
[ -f tests/test_rasterize_lidar.py ] && SMALL="$SMALL tests/test_rasterize_lidar.py"
timeout ${SANITIZER_TIMEOUT:-240} compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest -q -m gpu -p no:cacheprovider \
    $SMALL -k "parity and not big and not full" 2>&1 | tail -4 | tee "$OUT/memcheck.log"
timeout ${SANITIZER_TIMEOUT:-240} compute-sanitizer --tool racecheck --print-limit 5 python3 -m pytest -q -m gpu -p no:cacheprovider \
    $SMALL -k "parity and not big and not full" 2>&1 | tail -4 | tee "$OUT/racecheck.log"
fi
[ "${1:-}" = quick ] && exit 0

step "benchmarks"
timeout ${BENCH_TIMEOUT:-300} python3 benchmarks/bench_collect.py 2>&1 | grep -v -i warn | tee "$OUT/bench_collect.log"
NUREC_OPS_PDL=1 timeout 120 python3 benchmarks/bench_collect.py --no-compile 2>&1 | grep -v -i warn \
    | tee "$OUT/bench_collect_pdl.log"
timeout ${BENCH_TIMEOUT:-300} python3 benchmarks/bench_rasterize_camera.py 2>&1 | grep -v -i warn | tee "$OUT/bench_camera.log"
[ -f benchmarks/bench_rasterize_lidar.py ] && timeout ${BENCH_TIMEOUT:-300} python3 benchmarks/bench_rasterize_lidar.py 2>&1 \
    | grep -v -i warn | tee "$OUT/bench_lidar.log"
true

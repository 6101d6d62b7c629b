#!/usr/bin/env bash
# One call on the lent H200 that validates and measures everything: GPU
# tests, compute-sanitizer memcheck and racecheck, and every benchmark, with
# the logs under $OUT (the device tool brings them back). Run from the repo
# root there, with nurec_ops/_C.abi3.so built here and carried (see README:
# the library built on that machine's own toolchain crashed on errors).
#
#   bash benchmarks/device_session.sh [quick]     # quick: tests + sanitizers only
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
OUT=${OUT:-/tmp/nurec_out}
mkdir -p "$OUT"
step() { echo; echo "=== $*"; }

step "GPU tests"
timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider tests 2>&1 | tail -15 | tee "$OUT/gpu_tests.log"

step "compute-sanitizer memcheck / racecheck (small GPU tests of every op)"
SMALL="tests/test_collect.py tests/test_track_poses.py tests/test_rasterize_camera.py"
[ -f tests/test_rasterize_lidar.py ] && SMALL="$SMALL tests/test_rasterize_lidar.py"
timeout 240 compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest -q -m gpu -p no:cacheprovider \
    $SMALL -k "parity and not big and not full" 2>&1 | tail -4 | tee "$OUT/memcheck.log"
timeout 240 compute-sanitizer --tool racecheck --print-limit 5 python3 -m pytest -q -m gpu -p no:cacheprovider \
    $SMALL -k "parity and not big and not full" 2>&1 | tail -4 | tee "$OUT/racecheck.log"
[ "${1:-}" = quick ] && exit 0

step "benchmarks"
timeout 300 python3 benchmarks/bench_collect.py 2>&1 | grep -v -i warn | tee "$OUT/bench_collect.log"
NUREC_OPS_STAGED_BWD=1 timeout 120 python3 benchmarks/bench_collect.py --no-compile 2>&1 | grep -v -i warn \
    | tee "$OUT/bench_collect_staged_bwd.log"
timeout 300 python3 benchmarks/bench_rasterize_camera.py 2>&1 | grep -v -i warn | tee "$OUT/bench_camera.log"
[ -f benchmarks/bench_rasterize_lidar.py ] && timeout 300 python3 benchmarks/bench_rasterize_lidar.py 2>&1 \
    | grep -v -i warn | tee "$OUT/bench_lidar.log"
true

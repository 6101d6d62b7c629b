#!/usr/bin/env bash
# Features per camera [C, N, D] (per_camera_features.patch, session 34) on
# the lent H200, in one call (carry .shared_data .whl .gsplat_chunks): the
# patch applied to this checkout and pip-built as a user builds; the
# camera's GPU tests (the registry's rows, the new ones among them; the
# rasterizer's own; the front end), the bad inputs, memcheck and racecheck
# on the new rows' parity; the front end's per-camera colours against [N, D]
# (bench_frontend_per_camera.py) and the four scenes' fwd+bwd
# (bench_builds.py), to show that [N, D] calls did not move.
#   bash benchmarks/prepared/validate_per_camera_features.sh 2>&1 | tee $OUT/log
set -u
export PYTHONUNBUFFERED=1 NUREC_OPS_SHARED_DATA=${NUREC_OPS_SHARED_DATA:-$PWD/.shared_data}
OUT=${OUT:-/tmp/validate_out}; mkdir -p "$OUT"
T0=$(date +%s); el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
quiet() { grep -v -i "warn\|cap = pol\|set_sync_debug_mode"; }
git apply benchmarks/prepared/per_camera_features.patch || { echo "patch failed"; exit 1; }
MAX_JOBS=16 python3 -m pip install -q --no-build-isolation --no-deps -e . > "$OUT/build.log" 2>&1; echo "pip build rc=$?"
el "built"
timeout 200 python3 -m pytest -q -m gpu -rfE --tb=short -p no:cacheprovider tests/test_op_registry.py \
    tests/test_rasterize_camera.py tests/test_gsplat_frontend.py -k "camera or front or gsplat or per_camera" \
    > "$OUT/gpu_tests.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/gpu_tests.log" | tail -12
el "camera GPU tests"
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_errors.py 2>&1 | tail -1
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_rasterize_camera.py -k "bad_input" 2>&1 | tail -1
el "bad inputs"
for tool in memcheck racecheck; do
    timeout 120 compute-sanitizer --tool $tool --print-limit 5 python3 -m pytest -q -m gpu -p no:cacheprovider \
        tests/test_op_registry.py tests/test_rasterize_camera.py -k "per-camera or per_camera" 2>&1 | tail -2
    el "$tool"
done
timeout 60 python3 benchmarks/bench_frontend_per_camera.py --rounds 5 2>&1 | quiet | tail -4
el "per-camera colours"
timeout 60 python3 benchmarks/bench_builds.py per_camera_features --rounds 3 --kernels 0 2>&1 | quiet | grep "fwd+bwd"
el "bench_builds"

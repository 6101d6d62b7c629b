#!/usr/bin/env bash
# gsplat's antialiased mode (antialiased.patch, session 33) on the lent
# H200, in one call of its own: the patch applied to this checkout after
# the kept patches named (none: main alone), pip-built as a user builds,
# then the camera's GPU tests (the registry's rows, the antialiased ones
# among them; the rasterizer's own; the front end; the real inputs), the
# bad inputs, memcheck and racecheck on the antialiased rows' parity, and
# vs gsplat 1.5.3 in both modes on the gardens (carry .shared_data .whl
# .gsplat_chunks).
#   bash benchmarks/prepared/validate_antialiased.sh [KEPT_PATCH...] 2>&1 | tee $OUT/log
set -u
export PYTHONUNBUFFERED=1 NUREC_OPS_SHARED_DATA=${NUREC_OPS_SHARED_DATA:-$PWD/.shared_data}
OUT=${OUT:-/tmp/validate_out}; mkdir -p "$OUT"
T0=$(date +%s); el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
quiet() { grep -v -i "warn\|cap = pol\|set_sync_debug_mode"; }
for q in "$@" antialiased; do
    git apply "benchmarks/prepared/$q.patch" || { echo "patch $q failed"; exit 1; }; echo "applied $q"
done
(source benchmarks/peer_gsplat.sh > /tmp/gsplat_setup.log 2>&1) &
MAX_JOBS=14 python3 -m pip install -q --no-build-isolation --no-deps -e . > "$OUT/build.log" 2>&1; echo "pip build rc=$?"
grep -i "spill" "$OUT/build.log" | grep -i "project_kernel\|project_backward" | head -6
wait
el "built"
timeout 200 python3 -m pytest -q -m gpu -rfE --tb=short -p no:cacheprovider tests/test_op_registry.py \
    tests/test_rasterize_camera.py tests/test_gsplat_frontend.py tests/test_real_inputs.py \
    -k "not lidar and not collect and not track_poses and not covar and not splat_meta" \
    > "$OUT/gpu_tests.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/gpu_tests.log" | tail -12
el "camera GPU tests"
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_errors.py 2>&1 | tail -1
el "bad inputs"
for tool in memcheck racecheck; do
    timeout 90 compute-sanitizer --tool $tool --print-limit 5 python3 -m pytest -q -m gpu -p no:cacheprovider \
        tests/test_op_registry.py -k "parity and antialiased" 2>&1 | tail -2
    el "$tool"
done
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
for mode in --antialiased ""; do
    timeout 75 python3 benchmarks/vs_gsplat.py $mode --scenes garden,garden3 --rounds 3 2>&1 | quiet | tail -10
    el "vs gsplat ${mode:-classic}"
done

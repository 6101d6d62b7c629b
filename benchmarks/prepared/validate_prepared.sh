#!/usr/bin/env bash
# The prepared patches named, on the lent H200 in one call (carry
# .shared_data .whl .gsplat_chunks): the checkout as it is is built beside
# (setup.py, /tmp/base) while the patches are applied to the checkout and
# pip-built as a user builds; then the camera's GPU tests (the registry's
# rows, the rasterizer's own, the front end), the bad inputs, memcheck and
# racecheck (sanitize_rasterizers.sh: the registry's parity rows, new ones
# among them, and the rasterizers' tests marked sanitize), the four scenes' fwd+bwd
# (bench_builds.py: base, new, new, base) and the front end's per-camera
# colours (bench_frontend_per_camera.py), on the patched tree.
#   bash benchmarks/prepared/validate_prepared.sh ldl_backward_opacity per_camera_features eps2d 2>&1 | tee $OUT/log
# (in the order given: eps2d after per_camera_features)
set -u
export PYTHONUNBUFFERED=1 NUREC_OPS_SHARED_DATA=${NUREC_OPS_SHARED_DATA:-$PWD/.shared_data}
OUT=${OUT:-/tmp/validate_out}; mkdir -p "$OUT"
T0=$(date +%s); el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
quiet() { grep -v -i "warn\|cap = pol\|set_sync_debug_mode"; }
R=$PWD
rm -rf /tmp/base && mkdir -p /tmp/base && tar --exclude=./.git --exclude=./build --exclude='./nurec_ops/_C*' \
    --exclude=./.whl --exclude=./.gsplat_chunks -cf - . | tar -xf - -C /tmp/base
(cd /tmp/base && MAX_JOBS=6 python3 setup.py build_ext --inplace > build.log 2>&1; echo "base built: $?") &
for q in "$@"; do git apply "benchmarks/prepared/$q.patch" || { echo "patch $q failed"; exit 1; }; echo "applied $q"; done
MAX_JOBS=10 python3 -m pip install -q --no-build-isolation --no-deps -e . > "$OUT/build.log" 2>&1; echo "pip build rc=$?"
wait; el "built"
timeout 200 python3 -m pytest -q -m gpu -rfE --tb=short -p no:cacheprovider tests/test_op_registry.py \
    tests/test_rasterize_camera.py tests/test_gsplat_frontend.py -k "camera or front or gsplat or packed" \
    > "$OUT/gpu_tests.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/gpu_tests.log" | tail -12
el "camera GPU tests"
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_errors.py 2>&1 | tail -1
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_rasterize_camera.py -k "bad_input" 2>&1 | tail -1
el "bad inputs"
T0=$T0 bash benchmarks/prepared/sanitize_rasterizers.sh
for v in base new new base; do d=$R; [ $v = base ] && d=/tmp/base
    (cd $d && timeout 50 python3 benchmarks/device/bench_builds.py $v --rounds 3 --kernels 0 2>&1 | quiet | grep "fwd+bwd"); done
el "bench_builds"
timeout 50 python3 benchmarks/bench_frontend_per_camera.py --rounds 3 2>&1 | quiet | tail -4
el "per-camera colours"

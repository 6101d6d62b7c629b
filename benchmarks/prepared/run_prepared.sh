#!/usr/bin/env bash
# Session 30's prepared patch on the lent H200, in one call (carry
# .shared_data): two builds of this checkout side by side,
#   base - the checkout as it is,
#   new  - + footprint_reciprocal.patch;
# the projection and emission kernels of each (bench_projection.py, twice in
# opposite orders), the new tree's camera binning tests, memcheck and
# racecheck on them, and bench_builds base / new twice in opposite orders.
#   bash benchmarks/prepared/run_prepared.sh 2>&1 | tee $OUT/log
set -u
export PYTHONUNBUFFERED=1 NUREC_OPS_SHARED_DATA=${NUREC_OPS_SHARED_DATA:-$PWD/.shared_data}
DIR=${VARIANT_DIR:-/tmp/prepared}
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
quiet() { grep -v -i "warn"; }
P=$PWD/benchmarks/prepared
PIDS=()
for v in base new; do
    rm -rf "$DIR/$v"; mkdir -p "$DIR/$v"
    tar --exclude=./.git --exclude=./build --exclude=./.shared_data --exclude=./.whl --exclude=./.gsplat_chunks \
        --exclude=./.dev --exclude='./nurec_ops/_C*' -cf - . | tar -xf - -C "$DIR/$v"
    if [ $v = new ]; then (cd "$DIR/$v" && git apply "$P/footprint_reciprocal.patch") || { echo "patch failed"; exit 1; }; fi
    (cd "$DIR/$v" && MAX_JOBS=7 python3 setup.py build_ext --inplace > build.log 2>&1
     echo "built $v: rc=$?"; grep -i "spill" build.log | grep -i project_kernel | head -4) &
    PIDS+=($!)
done
wait "${PIDS[@]}"
el "built"
for v in base new new base; do (cd "$DIR/$v" && timeout 60 python3 benchmarks/bench_projection.py $v 2>&1 | quiet); done
el "projection and emission kernels"
cd "$DIR/new"
SEL="binning or tile or real_table or garden or box"
timeout 120 python3 -m pytest -q -m gpu -rfE --tb=short -p no:cacheprovider tests/test_rasterize_camera.py \
    tests/test_real_inputs.py tests/test_op_registry.py -k "$SEL" 2>&1 | grep -E "^(FAILED|ERROR)|passed|failed" | tail -8
el "new: binning tests"
for tool in memcheck racecheck; do
    timeout 150 compute-sanitizer --tool $tool --print-limit 5 python3 -m pytest -q -m gpu -p no:cacheprovider \
        tests/test_rasterize_camera.py tests/test_real_inputs.py -k "binning_lists or real_table or tile_boxes or garden" \
        2>&1 | tail -2
    el "new: $tool"
done
for round in 1 2; do
    order="base new"; [ $round = 2 ] && order="new base"
    for v in $order; do (cd "$DIR/$v" && timeout 100 python3 benchmarks/bench_builds.py $v --kernels 0 2>&1 | quiet | grep "fwd+bwd"); done
done
el "done"

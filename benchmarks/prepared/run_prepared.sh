#!/usr/bin/env bash
# Session 29's prepared patches on the lent H200, in one call (carry
# .shared_data): three builds of this checkout side by side,
#   base - the checkout as it is,
#   diag - + projection_cells_diag.patch, built with -DNUREC_DIAG_NO_CELLS,
#   new  - + meta_in_projection.patch + lidar_row_search.patch;
# the projections' time with and without their cells' walk (base, diag);
# the new tree's GPU tests and memcheck on them; bench_builds base / new
# twice in opposite orders; bench_meta --kernels in each.
#   bash benchmarks/prepared/run_prepared.sh 2>&1 | tee $OUT/log
set -u
export PYTHONUNBUFFERED=1 NUREC_OPS_SHARED_DATA=${NUREC_OPS_SHARED_DATA:-$PWD/.shared_data}
DIR=${VARIANT_DIR:-/tmp/prepared}
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
quiet() { grep -v -i "warn"; }
P=$PWD/benchmarks/prepared
declare -A PATCHES=([base]="" [diag]="$P/projection_cells_diag.patch"
                    [new]="$P/meta_in_projection.patch $P/lidar_row_search.patch")
declare -A FLAGS=([base]="" [diag]="-DNUREC_DIAG_NO_CELLS" [new]="")
PIDS=()
for v in base diag new; do
    rm -rf "$DIR/$v"; mkdir -p "$DIR/$v"
    tar --exclude=./.git --exclude=./build --exclude=./.shared_data --exclude=./.whl --exclude=./.gsplat_chunks \
        --exclude=./.dev --exclude='./nurec_ops/_C*' -cf - . | tar -xf - -C "$DIR/$v"
    for patch in ${PATCHES[$v]}; do
        (cd "$DIR/$v" && { git apply "$patch" 2>/dev/null || patch -p1 -s < "$patch"; }) || { echo "$v: $patch failed"; exit 1; }
    done
    (cd "$DIR/$v" && NUREC_OPS_NVCC_FLAGS="${FLAGS[$v]}" MAX_JOBS=5 python3 setup.py build_ext --inplace > build.log 2>&1
     echo "built $v (${FLAGS[$v]}): rc=$?"; grep -i "spill" build.log | grep -v " 0 bytes spill" | head -4) &
    PIDS+=($!)
done
wait "${PIDS[@]}"
el "built"
cp "$DIR/diag/benchmarks/projection_cells_diag.py" "$DIR/base/benchmarks/"
for v in base diag diag base; do (cd "$DIR/$v" && timeout 60 python3 benchmarks/projection_cells_diag.py $v 2>&1 | quiet); done
el "projections with and without their cells"
cd "$DIR/new"
timeout 200 python3 -m pytest -q -m gpu -rfE --tb=short -p no:cacheprovider tests/test_gsplat_frontend.py \
    tests/test_rasterize_lidar.py tests/test_real_inputs.py 2>&1 | grep -E "^(FAILED|ERROR)|passed|failed|error" | tail -8
el "new: GPU tests"
timeout 150 compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest -q -m gpu -p no:cacheprovider \
    tests/test_gsplat_frontend.py tests/test_rasterize_lidar.py -k "forward_meta or row_search or cuda_meta_matches_cpu" \
    2>&1 | tail -2
el "new: memcheck"
for round in 1 2; do
    order="base new"; [ $round = 2 ] && order="new base"
    for v in $order; do
        (cd "$DIR/$v" && timeout 100 python3 benchmarks/bench_builds.py $v --kernels $([ $round = 1 ] && echo 1 || echo 0) \
            2>&1 | quiet | tail -8 | cut -c1-420)
    done
    el "bench_builds round $round"
done
for v in base new; do (cd "$DIR/$v" && timeout 100 python3 benchmarks/bench_meta.py --rounds 5 --kernels 2>&1 | quiet | tail -30); done
el "done"

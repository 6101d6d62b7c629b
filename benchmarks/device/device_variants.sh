#!/usr/bin/env bash
# Kernel variants side by side on the lent H200, in one call: each variant is
# this tree built in a copy of its own with its own NUREC_OPS_NVCC_FLAGS (the
# kernels' tuning macros: RC_BWD_WARP_W, NUREC_SPLAT_ONE_ATOMIC, ...), all
# built at once, then timed by benchmarks/device/bench_builds.py one process per
# variant (the copy's own script and library), twice, the second round in
# the opposite order.
#
#   VARIANTS='main:|one:-DRC_BWD_PIX=1' bash benchmarks/device/device_variants.sh
#
# Carry .shared_data holding gsplat/test_garden.npz etc. (the layout of
# ../shared/data/): the garden scenes read it through NUREC_OPS_SHARED_DATA.
# ROUNDS=1 times one round only; TESTS='pytest args' runs those GPU tests in
# the first variant's copy between the builds and the timings (TESTS_TIMEOUT
# seconds, default 120).
set -u
export PYTHONUNBUFFERED=1 NUREC_OPS_SHARED_DATA=${NUREC_OPS_SHARED_DATA:-$PWD/.shared_data}
DIR=${VARIANT_DIR:-/tmp/nurec_variants}
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
[ -f "$NUREC_OPS_SHARED_DATA/gsplat/test_garden.npz" ] || { echo "no gsplat/test_garden.npz under $NUREC_OPS_SHARED_DATA"; exit 1; }
IFS='|' read -r -a SPECS <<< "${VARIANTS:?set VARIANTS=name:flags|name:flags}"
NAMES=()
JOBS=$(( ${MAX_JOBS:-16} / ${#SPECS[@]} )); [ $JOBS -lt 1 ] && JOBS=1
PIDS=()
for spec in "${SPECS[@]}"; do
    name=${spec%%:*}; flags=${spec#*:}
    NAMES+=("$name")
    rm -rf "$DIR/$name"; mkdir -p "$DIR/$name"
    tar --exclude=./.git --exclude=./build --exclude=./.shared_data --exclude=./.whl --exclude=./.gsplat_chunks \
        --exclude=./.ncore_site --exclude=./.dev --exclude='./nurec_ops/_C*' -cf - . | tar -xf - -C "$DIR/$name"
    (cd "$DIR/$name" && NUREC_OPS_NVCC_FLAGS="$flags" MAX_JOBS=$JOBS python3 setup.py build_ext --inplace \
        > build.log 2>&1; echo "built $name ($flags): rc=$?") &
    PIDS+=($!)
done
wait "${PIDS[@]}"  # by id: a bare wait would also wait for any process substitution
el "built"
if [ -n "${TESTS:-}" ]; then
    (cd "$DIR/${NAMES[0]}" && timeout ${TESTS_TIMEOUT:-120} python3 -m pytest -q -m gpu -rfE --tb=short \
        -p no:cacheprovider $TESTS 2>&1 | grep -E "^(FAILED|ERROR)|passed|failed|error" | tail -12)
    el "tests in ${NAMES[0]}"
fi
for round in $(seq 1 ${ROUNDS:-2}); do
    order=("${NAMES[@]}")
    [ $round = 2 ] && order=($(printf '%s\n' "${NAMES[@]}" | tac))
    for name in "${order[@]}"; do
        (cd "$DIR/$name" && timeout ${BENCH_TIMEOUT:-120} python3 benchmarks/device/bench_builds.py "$name" \
            --kernels $([ $round = 1 ] && echo 1 || echo 0) 2>&1 | grep -v -i warn | tail -8 | cut -c1-400)
    done
    el "round $round"
done

#!/usr/bin/env bash
# The prepared patches on the lent H200, in two calls (carry .shared_data
# .whl .gsplat_chunks), over three builds of this checkout side by side:
#   base - the checkout as it is,
#   all  - + session 31's four: emission_owner_or, depth_sort_tile,
#          forward_depth_pack, binning_launches,
#   ldl  - all + ldl_exponent (session 32; it applies after forward_depth_pack).
# Each call builds what the machine does not hold yet (a stamp per tree).
#   bash benchmarks/prepared/run_prepared.sh check 2>&1 | tee $OUT/log
#     on ldl (all five patches): the rasterizers' GPU tests (the registry's
#     camera and lidar rows: parity, lists cut into parts, the binning's
#     ways; the rasterizers' and the real inputs' own), then memcheck and
#     racecheck on those marked sanitize.
#   bash benchmarks/prepared/run_prepared.sh time 2>&1 | tee $OUT/log
#     every kernel of the 1944 garden's and the street's forward (base, all,
#     ldl); fwd+bwd (bench_builds base, all, ldl, then the reverse order);
#     vs gsplat on the 1944 garden (ldl, all, base); the projection and
#     emission kernels (bench_projection base, all, all, base).
set -u
PHASE=${1:-check}
export PYTHONUNBUFFERED=1 NUREC_OPS_SHARED_DATA=${NUREC_OPS_SHARED_DATA:-$PWD/.shared_data}
R=$PWD; P=$PWD/benchmarks/prepared; DIR=${VARIANT_DIR:-/tmp/prepared}
T0=$(date +%s); el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
quiet() { grep -v -i "warn\|cap = pol\|set_sync_debug_mode"; }
FOUR="emission_owner_or depth_sort_tile forward_depth_pack binning_launches"
patches_of() { case $1 in base) echo "" ;; all) echo "$FOUR" ;; ldl) echo "$FOUR ldl_exponent" ;; esac; }
[ "$PHASE" = time ] && { (cd "$R" && source benchmarks/peer_gsplat.sh > /tmp/gsplat_setup.log 2>&1) & }
PIDS=()
for v in base all ldl; do
    stamp="$(patches_of $v) $(cat "$P"/*.patch | md5sum)"
    if [ -f "$DIR/$v/.built" ] && [ "$(cat "$DIR/$v/.built")" = "$stamp" ] && ls "$DIR/$v"/nurec_ops/_C* > /dev/null 2>&1; then
        echo "held: $v"; continue
    fi
    rm -rf "$DIR/$v"; mkdir -p "$DIR/$v"
    tar --exclude=./.git --exclude=./build --exclude=./.shared_data --exclude=./.whl --exclude=./.gsplat_chunks \
        --exclude=./.dev --exclude='./nurec_ops/_C*' -cf - . | tar -xf - -C "$DIR/$v"
    (cd "$DIR/$v" && for q in $(patches_of $v); do git apply "$P/$q.patch" || exit 1; done) || { echo "patch failed: $v"; exit 1; }
    (cd "$DIR/$v" && MAX_JOBS=5 python3 setup.py build_ext --inplace > build.log 2>&1; rc=$?; echo "built $v: rc=$rc"
     [ $rc = 0 ] && echo "$stamp" > .built; grep -i "spill" build.log | grep -i "forward_kernel\|emit_kernel" | head -4) &
    PIDS+=($!)
done
[ ${#PIDS[@]} -gt 0 ] && wait "${PIDS[@]}"
el "built"

if [ "$PHASE" = check ]; then
    cd "$DIR/ldl"
    timeout 200 python3 -m pytest -q -m gpu -rfE --tb=short -p no:cacheprovider tests/test_op_registry.py \
        tests/test_rasterize_camera.py tests/test_rasterize_lidar.py tests/test_real_inputs.py \
        -k "camera or lidar or binning or real or rasterize" 2>&1 | grep -E "^(FAILED|ERROR)|passed|failed" | tail -10
    el "ldl: the rasterizers' GPU tests"
    T0=$T0 bash "$P/sanitize_rasterizers.sh" "ldl: "
else
    for v in base all ldl; do
        (cd "$DIR/$v" && timeout 60 python3 - "$v" <<'PY' 2>&1 | quiet | head -26
import sys
import torch
sys.path.insert(0, "benchmarks"); sys.path.insert(0, ".")
import nurec_ops
from bench_rasterize_camera import garden, street
from timing import kernel_breakdown
for name, sc in (("garden 1944 x3", garden("cuda", torch.float32, 3)), ("street", street("cuda", torch.float32))):
    def f():
        with torch.no_grad():
            nurec_ops.rasterize_camera(sc["means"], sc["quats"], sc["scales"], sc["opacities"], sc["features"],
                                       sc["viewmats"], sc["Ks"], sc["width"], sc["height"], near=0.01, far=1e10)
    rows = kernel_breakdown(f, calls=10, warmup=3, top=60)
    print(f"[{sys.argv[1]}] {name}: total {sum(float(r[3]) for r in rows):.1f} us (name, launches, median, total)")
    for r in rows[:10]:
        print("   ", *r)
PY
        )
    done
    el "forward kernels"
    for v in base all ldl ldl all base; do (cd "$DIR/$v" && timeout 60 python3 benchmarks/bench_builds.py $v --kernels 0 \
        --rounds 3 2>&1 | quiet | grep "fwd+bwd"); done
    el "bench_builds"
    wait; tail -1 /tmp/gsplat_setup.log
    for v in ldl all base; do (cd "$DIR/$v" && echo "-- $v" && PYTHONPATH=/tmp/site timeout 80 python3 \
        benchmarks/vs_gsplat.py --scenes garden3 --rounds 5 2>&1 | quiet | tail -3); done
    el "vs gsplat"
    for v in base all all base; do (cd "$DIR/$v" && timeout 60 python3 benchmarks/bench_projection.py $v 2>&1 | quiet); done
    el "projection and emission"
fi
el "done"

#!/usr/bin/env bash
# Session 31's prepared patches on the lent H200, in one call (carry
# .shared_data .whl .gsplat_chunks): three builds of this checkout side by side,
#   base - the checkout as it is,
#   emit - + emission_owner_or.patch,
#   all  - + emission_owner_or.patch, depth_sort_tile.patch, forward_depth_pack.patch,
#          binning_launches.patch;
# every kernel of the 1944 garden's and the street's forward (base, all); the
# projection and emission kernels (bench_projection, base / emit, twice in
# opposite orders); the camera GPU tests and the lidar's binning tests on
# `all`, memcheck and racecheck there; vs gsplat on the 1944 garden (all,
# base); bench_builds base / all twice; CUB's depth sort tiles standalone.
#   bash benchmarks/prepared/run_prepared.sh 2>&1 | tee $OUT/log
set -u
export PYTHONUNBUFFERED=1 NUREC_OPS_SHARED_DATA=${NUREC_OPS_SHARED_DATA:-$PWD/.shared_data}
R=$PWD; P=$PWD/benchmarks/prepared; DIR=${VARIANT_DIR:-/tmp/prepared}
T0=$(date +%s); el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
quiet() { grep -v -i "warn\|cap = pol\|set_sync_debug_mode"; }
nvcc -O3 -std=c++17 -arch=sm_90 -o /tmp/dsb "$P/depth_sort_bench.cu" > /tmp/dsb.log 2>&1 &
PIDS=()
for v in base emit all; do
    rm -rf "$DIR/$v"; mkdir -p "$DIR/$v"
    tar --exclude=./.git --exclude=./build --exclude=./.shared_data --exclude=./.whl --exclude=./.gsplat_chunks \
        --exclude=./.dev --exclude='./nurec_ops/_C*' -cf - . | tar -xf - -C "$DIR/$v"
    case $v in
        emit) (cd "$DIR/$v" && git apply "$P/emission_owner_or.patch") || { echo "patch failed"; exit 1; } ;;
        all) (cd "$DIR/$v" && for q in emission_owner_or depth_sort_tile forward_depth_pack binning_launches; do
                 git apply "$P/$q.patch" || exit 1; done) || { echo "patch failed"; exit 1; } ;;
    esac
    (cd "$DIR/$v" && MAX_JOBS=5 python3 setup.py build_ext --inplace > build.log 2>&1; echo "built $v: rc=$?") &
    PIDS+=($!)
done
wait "${PIDS[@]}"
el "built"
for v in base all; do
    (cd "$DIR/$v" && timeout 60 python3 - "$v" <<'PY' 2>&1 | quiet | head -26
import os, sys
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
for v in base emit emit base; do (cd "$DIR/$v" && timeout 60 python3 benchmarks/bench_projection.py $v 2>&1 | quiet); done
el "projection and emission"
cd "$DIR/all"
timeout 150 python3 -m pytest -q -m gpu -rfE --tb=short -p no:cacheprovider tests/test_rasterize_camera.py \
    tests/test_rasterize_lidar.py -k "not lidar or binning or tile or real_table or box" 2>&1 |
    grep -E "^(FAILED|ERROR)|passed|failed" | tail -8
el "all: camera tests, lidar binning tests"
for tool in memcheck racecheck; do
    timeout 90 compute-sanitizer --tool $tool --print-limit 5 python3 -m pytest -q -m gpu -p no:cacheprovider \
        tests/test_rasterize_camera.py tests/test_rasterize_lidar.py \
        -k "parts or garden or depth or binning_lists or real_table" 2>&1 | tail -2
    el "all: $tool"
done
(cd "$R" && source benchmarks/peer_gsplat.sh > /tmp/gsplat_setup.log 2>&1); tail -1 /tmp/gsplat_setup.log
for v in all base; do (cd "$DIR/$v" && echo "-- $v" && PYTHONPATH=/tmp/site timeout 80 python3 benchmarks/vs_gsplat.py \
    --scenes garden3 --rounds 5 2>&1 | quiet | tail -3); done
el "vs gsplat"
for v in base all all base; do (cd "$DIR/$v" && timeout 70 python3 benchmarks/bench_builds.py $v --kernels 0 --rounds 3 2>&1 |
    quiet | grep "fwd+bwd"); done
el "bench_builds"
wait; grep -i error /tmp/dsb.log; timeout 50 /tmp/dsb
el "done"

#!/usr/bin/env bash
# After run_prepared.sh: the patches kept, applied to this checkout on the
# lent H200 and built there as a user would (pip), then the whole GPU suite,
# the bad inputs, memcheck and racecheck on the rasterizers' tests marked
# sanitize (the registry's parity and parts rows among them), vs gsplat on
# the three scenes and the rig step (carry .shared_data .whl
# .gsplat_chunks). The device's checkout is a copy: the patches are
# committed here afterwards, with these figures.
#   bash benchmarks/prepared/validate_kept.sh emission_owner_or forward_depth_pack ... 2>&1 | tee $OUT/log
# (in the order given: ldl_exponent after forward_depth_pack)
set -u
export PYTHONUNBUFFERED=1 NUREC_OPS_SHARED_DATA=${NUREC_OPS_SHARED_DATA:-$PWD/.shared_data}
OUT=${OUT:-/tmp/validate_out}; mkdir -p "$OUT"
T0=$(date +%s); el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
quiet() { grep -v -i "warn\|cap = pol\|set_sync_debug_mode"; }
for q in "$@"; do git apply "benchmarks/prepared/$q.patch" || { echo "patch $q failed"; exit 1; }; echo "applied $q"; done
(source benchmarks/peer_gsplat.sh > /tmp/gsplat_setup.log 2>&1) &
MAX_JOBS=14 python3 -m pip install -q --no-build-isolation --no-deps -e . > "$OUT/build.log" 2>&1; echo "pip build rc=$?"
grep -i "spill" "$OUT/build.log" | grep -i "forward_kernel\|emit_kernel\|project_kernel" | head -6
wait
el "built"
timeout 240 python3 -m pytest -q -m gpu -rfE --tb=short -p no:cacheprovider tests > "$OUT/gpu_tests.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/gpu_tests.log" | tail -12
el "GPU suite"
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_errors.py 2>&1 | tail -1
el "bad inputs"
T0=$T0 bash benchmarks/prepared/sanitize_rasterizers.sh
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
timeout 120 python3 benchmarks/vs_gsplat.py --rounds 5 2>&1 | quiet | tail -6
el "vs gsplat"
timeout 90 python3 benchmarks/bench_rig_step.py --gsplat --steps 20 2>&1 | quiet | tail -8
el "rig step"

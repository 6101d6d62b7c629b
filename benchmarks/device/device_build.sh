#!/usr/bin/env bash
# On the lent GPU machine: build nurec_ops there as a user would (pip, the
# machine's own compilers), say which toolchain built it, and probe the
# error path (a bad argument must raise, not crash). With GSPLAT=1 it also
# installs the peer (benchmarks/device/peer_gsplat.sh) in parallel.
#   bash benchmarks/device/device_build.sh
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/nurec_out}
mkdir -p "$OUT"
step() { echo; echo "=== $*"; }

if [ "${GSPLAT:-0}" = 1 ]; then
    (source benchmarks/device/peer_gsplat.sh > "$OUT/gsplat_build.log" 2>&1; echo "gsplat build rc=$?" >> "$OUT/gsplat_build.log") &
    GS_PID=$!
fi

step "toolchain"
for t in c++ g++ gcc cc nvcc; do printf '%-5s %s\n' "$t" "$(command -v $t)"; done
c++ --version | head -1
echo "CXX=${CXX:-} CC=${CC:-} LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"

step "build (pip install --no-build-isolation -e .)"
start=$(date +%s)
MAX_JOBS=${MAX_JOBS:-8} python3 -m pip install -q --no-build-isolation --no-deps -e . > "$OUT/build.log" 2>&1
echo "rc=$? in $(( $(date +%s) - start )) s"; tail -5 "$OUT/build.log"
so=$(ls nurec_ops/_C*.so | head -1)
echo "library: $so"
ldd "$so" | grep -E "stdc|gcc|torch" || true
echo "dynamic C++ runtime symbols it imports:"
nm -D --undefined-only "$so" | grep -E "cxa_throw|Unwind_Resume|gxx_personality|cxa_begin_catch" || echo "(none: statically linked?)"
echo "defined (a private copy of the C++ runtime?):"
nm -D --defined-only "$so" | grep -c -E "cxa_|_Unwind_|gxx_personality" || true
strings -a "$so" | grep -m3 "GCC: (" || true

step "error path probe"
cat > /tmp/probe.py <<'PY'
import sys, torch, nurec_ops
d = sys.argv[1]
try:
    nurec_ops.interpolate_track_poses(torch.ones(5, 6, device=d, dtype=torch.float64), torch.arange(5, device=d),
                                      torch.zeros(1, 2, dtype=torch.int64, device=d), torch.zeros(1, dtype=torch.int64, device=d))
    print("NO-ERROR")
except RuntimeError as e:
    print("RAISED", str(e).splitlines()[0])
PY
for d in cpu cuda; do
    python3 /tmp/probe.py $d; rc=$?; echo "probe $d rc=$rc"
    if [ $rc -ne 0 ] && [ $d = cpu ]; then
        cuda-gdb -batch -ex run -ex bt --args python3 /tmp/probe.py cpu 2>&1 | grep -v "^\[New Thread\|^\[Thread" | tail -40
    fi
done

if [ "${GSPLAT:-0}" = 1 ]; then
    step "gsplat peer"
    wait $GS_PID
    tail -4 "$OUT/gsplat_build.log"
    ls -la "$OUT"
fi
true

#!/usr/bin/env bash
# The peer on the lent GPU machine: installs gsplat from the carried wheel
# (.whl/gsplat-*.whl) into /tmp/site and makes its CUDA extension importable.
# Where an earlier call brought its compiled library back (carry
# .gsplat_chunks/, the pieces of gsplat_cuda.so.tgz) it is unpacked and
# imported as gsplat.csrc (gsplat's own first choice, no JIT); else it is
# compiled once (~70 s with 16 jobs) and its pieces are written to $OUT.
# Source it: afterwards PYTHONPATH points at the peer.
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/gsplat-*.whl || return 1
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
start=$(date +%s)
if [ -d .gsplat_chunks ]; then
    cat .gsplat_chunks/gsplat_cuda.so.tgz.* | tar xzf - -C /tmp/site
    echo "from gsplat_cuda import *  # noqa: F401,F403 (compiled by an earlier call)" > /tmp/site/gsplat/csrc.py
else
    export TORCH_EXTENSIONS_DIR=/tmp/gsplat_build TORCH_CUDA_ARCH_LIST=9.0
    MAX_JOBS=${GSPLAT_JOBS:-8} python3 -c "from gsplat.cuda._backend import _C" || return 1
    if [ -n "${OUT:-}" ]; then
        (cd /tmp/gsplat_build/gsplat_cuda && tar czf - gsplat_cuda.so | split -b 15m - "$OUT/gsplat_cuda.so.tgz.")
    fi
fi
python3 -c "import gsplat; from gsplat.cuda._backend import _C; print('gsplat', gsplat.__version__, 'extension', _C.__file__)"
echo "gsplat ready in $(( $(date +%s) - start )) s"

#!/usr/bin/env bash
# The time to the first training step and the steady step on a 30 s five-camera + lidar NCore clip, on the GPU.
# From the repo root (the library built), with the NCore packages carried in .ncore_site:
#   PYTHONPATH=$PWD/.ncore_site:$PWD bash benchmarks/device/device_ncore.sh
# Writes the clip to /tmp/ncore_clip30 (kept for a second run), prints a table, leaves bench_ncore_step.{txt,json}
# in $OUT (or /tmp/ncore_bench). Knobs: CLIP_SCALE (stored images' scale of 1920x1280/886, default 1.0),
# CAMERA_HZ (10), LIDAR_COLS (3600), TRAIN_SCALE (train_ncore --image-scale, 1.0), STEPS (300).
set -euo pipefail
export PYTHONPATH=${PYTHONPATH:-$PWD/.ncore_site:$PWD}
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp/ncore_bench}
clip=/tmp/ncore_clip30
mkdir -p "$out"
python3 -c "import sys, torch, ncore, zarr, numcodecs, nurec_ops; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'ncore from', ncore.__path__[0], 'zarr', zarr.__version__, 'nurec_ops', nurec_ops.__file__)"
if [ ! -f "$clip/clip.json" ]; then
  python3 benchmarks/make_ncore_clip.py --out "$clip" --seconds 30 --cameras 5 --image-scale "${CLIP_SCALE:-1.0}" \
    --camera-hz "${CAMERA_HZ:-10}" --lidar-rows 128 --lidar-cols "${LIDAR_COLS:-3600}" | tee "$out/make_ncore_clip.txt"
fi
python3 benchmarks/bench_ncore_step.py --clip "$clip/clip.json" --steps "${STEPS:-300}" \
  --image-scale "${TRAIN_SCALE:-1.0}" --json "$out/bench_ncore_step.json" | tee "$out/bench_ncore_step.txt"

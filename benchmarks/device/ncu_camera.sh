#!/usr/bin/env bash
# Nsight Compute on the camera rasterizer's forward and backward kernels
# (street 1080p and garden 1944x1260 x3): speed of light, occupancy, launch
# statistics and warp stall reasons, one call after warm-up. Full reports
# under $OUT, the key lines printed.  bash benchmarks/device/ncu_camera.sh
set -u
OUT=${OUT:-/tmp/nurec_out}
export PYTHONPATH=$PWD NUREC_OPS_SHARED_DATA=${NUREC_OPS_SHARED_DATA:-$PWD/.shared_data}
for scene in camera-street camera-garden3; do
    ncu --clock-control none -k regex:"rc_(forward|backward)_kernel_f32" -s 2 -c 2 \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
        --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
        python3 benchmarks/device/ncu_step.py $scene --calls 2 > "$OUT/ncu_$scene.txt" 2>&1
    echo "=== $scene"
    grep -E "rc_(forward|backward)_kernel|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Compute \(SM\) Throughput|Memory Throughput|Warp Cycles Per Issued|Issue Slots Busy|Executed Ipc A|L1/TEX Hit|Stall|stall" \
        "$OUT/ncu_$scene.txt" | grep -v "^\s*$" | head -40
done

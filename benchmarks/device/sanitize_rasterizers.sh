#!/usr/bin/env bash
# memcheck, then racecheck, on the rasterizers' GPU tests marked sanitize
# (the registry's camera and lidar parity and parts rows, the rasterizers'
# own, the real inputs'), in the tree at the working directory; after each,
# a line with the seconds since $T0 and the label $1. Racecheck takes
# ~180 s on the H200 and ~235 s on an H100, memcheck ~20 s.
TESTS=${TESTS_DIR:-tests}
for tool in memcheck racecheck; do
    timeout $([ $tool = racecheck ] && echo 300 || echo 120) compute-sanitizer --tool $tool --print-limit 5 python3 -m pytest -q -m "gpu and sanitize" \
        -p no:cacheprovider "$TESTS/test_op_registry.py" "$TESTS/test_rasterize_camera.py" \
        "$TESTS/test_rasterize_lidar.py" "$TESTS/test_real_inputs.py" -k "camera or lidar or binning or real_table" \
        2>&1 | tail -2
    echo "[t=$(( $(date +%s) - ${T0:-$(date +%s)} ))s] ${1:-}$tool"
done

#!/usr/bin/env bash
# Every GPU test in K processes on the one GPU (NUREC_TEST_SHARD, tests/conftest.py),
# so that the whole suite fits one device call: in one process it ran past 600 s
# (four processes over the files: three done in ~400 s, the registry's file alone
# past its limit). Run from the repo root after the build.
#
#   bash benchmarks/device/gpu_tests.sh [K=4] [LIMIT_S=480] [pytest args, e.g. tests/test_rasterize_camera.py]
#
# Logs: $OUT/gpu_shard_<k>.log (OUT defaults to /tmp/nurec_out) and
# $OUT/gpu_times_<k>.tsv (each finished test's seconds, written as it finishes: a
# shard killed at the limit keeps them, where pytest's --durations printed nothing;
# summed at the end by test_times.py). Prints each
# shard's summary line and every failure; exits non-zero if any shard failed or
# ran past its limit.
set -u
K=${1:-4}
LIMIT=${2:-480}
shift $(( $# < 2 ? $# : 2 ))
WHAT=("$@")
[ ${#WHAT[@]} -eq 0 ] && WHAT=(tests)
OUT=${OUT:-/tmp/nurec_out}
mkdir -p "$OUT"
start=$(date +%s)
pids=()
for k in $(seq 0 $((K - 1))); do
    rm -f "$OUT/gpu_times_$k.tsv"
    NUREC_TEST_TIMES="$OUT/gpu_times_$k.tsv" NUREC_TEST_SHARD=$k/$K timeout "$LIMIT" python3 -m pytest -q -m gpu -rfE --tb=short -p no:cacheprovider \
        "${WHAT[@]}" > "$OUT/gpu_shard_$k.log" 2>&1 &
    pids+=($!)
done
rc=0
for k in $(seq 0 $((K - 1))); do
    wait "${pids[$k]}"
    r=$?
    line=$(grep -E "(passed|failed|error|skipped).* in [0-9.]+s" "$OUT/gpu_shard_$k.log" | tail -1)
    case $r in
        0) ;;
        124) line="PAST ITS ${LIMIT} s LIMIT (last: $(tail -c 200 "$OUT/gpu_shard_$k.log" | tr '\n' ' '))"; rc=1 ;;
        5) line="no tests selected" ;;  # pytest's code when a shard has none
        *) rc=1 ;;
    esac
    echo "shard $k/$K (rc $r): $line"
    grep -E "^(FAILED|ERROR) " "$OUT/gpu_shard_$k.log" | head -20
done
echo "GPU tests: ${K} shards in $(( $(date +%s) - start )) s, rc $rc"
# what each shard ran and for how long, killed shards included (tests/conftest.py's NUREC_TEST_TIMES)
python3 "$(dirname "$0")/test_times.py" "$OUT"/gpu_times_*.tsv --top 15 || true
exit $rc

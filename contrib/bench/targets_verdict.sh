#!/usr/bin/env bash
# Issue 45's speed targets (item 3, which takes in issues 12 and 13's) over
# the CSVs of contrib/bench/targets.sh (bench_np<N>_<collective>_<type>.csv
# in DIR):
#   contrib/bench/targets_verdict.sh DIR
# One line per target and CSV: the worst point and MET or MISSED; a missing
# CSV, or one without NCCL's numbers, is NOT RUN; a size whose loom result
# failed its check (loom-bench -c) is CHECK FAILED whatever its speed.
# ratio = loom busbw / NCCL busbw at the same size, so for a size >= 1 means
# loom's time <= NCCL's. Exit status 0 when every target was measured and
# met, 1 otherwise.
set -uo pipefail
dir=${1:?usage: targets_verdict.sh DIR}
status=0
# check NAME CSV RULE LIMIT: RULE picks the rows (by bytes) and what must
# hold there: time8 (8 B time in us <= LIMIT), or min ratio >= LIMIT over
# all, mid (256 KiB - 8 MiB) or large (>= 64 MiB) sizes.
check() {
    local name=$1 csv=$dir/$2 rule=$3 limit=$4
    if [ ! -s "$csv" ]; then
        printf '%-58s %-34s NOT RUN\n' "$name" "$2"
        status=1
        return
    fi
    awk -F, -v name="$name" -v file="$2" -v rule="$rule" -v limit="$limit" '
        NR == 1 || $6 == "" { next }
        {
            b = $1 + 0; take = 0
            if (rule == "time8") take = b == 8
            else if (rule == "all") take = 1
            else if (rule == "mid") take = b >= 262144 && b <= 8388608
            else if (rule == "large") take = b >= 67108864
            if (!take) next
            if ($7 == "FAIL") { failed = failed ? failed : b; next }
            if (rule != "time8" && $4 + 0 == 0) { nonccl = 1; next } # NCCL did not run
            v = rule == "time8" ? $2 + 0 : $6 + 0
            if (!seen || (rule == "time8" ? v > worst : v < worst)) { worst = v; at = b }
            seen = 1
        }
        END {
            if (failed) { printf "%-58s %-34s CHECK FAILED at %d B\n", name, file, failed; exit 1 }
            if (!seen && nonccl) { printf "%-58s %-34s NOT RUN (no NCCL numbers)\n", name, file; exit 1 }
            if (!seen) { printf "%-58s %-34s NO SIZES\n", name, file; exit 2 }
            ok = rule == "time8" ? worst <= limit : worst >= limit
            unit = rule == "time8" ? " us" : "x"
            printf "%-58s %-34s worst %.3f%s at %d B: %s\n", name, file, worst, unit, at, ok ? "MET" : "MISSED"
            exit ok ? 0 : 1
        }' "$csv" || status=1
}
echo "# issue 45: 4 ranks, 4 GPUs, blocking, same mpirun as NCCL"
for t in float char; do
    check "45: allreduce, 4 ranks, 8 B <= 10 us" bench_np4_allreduce_$t.csv time8 10
    check "45: allreduce, 4 ranks, 256 KiB - 8 MiB >= 1.3x NCCL busbw" bench_np4_allreduce_$t.csv mid 1.3
    check "45: allreduce, 4 ranks, >= 64 MiB >= 1.10x NCCL busbw" bench_np4_allreduce_$t.csv large 1.10
    for c in bcast reduce allgather reduce_scatter; do
        check "45: $c, 4 ranks, every size >= 1.0x NCCL" bench_np4_${c}_$t.csv all 1.0
    done
done
# alltoall(v), gather(v), scatter(v) against grouped ncclSend/ncclRecv of the same pairs.
for c in alltoall alltoallv gather gatherv scatter scatterv; do
    for t in char float; do
        check "45: $c, 4 ranks, every size >= 1.0x NCCL" bench_np4_${c}_$t.csv all 1.0
    done
done
echo "# issue 45: 2 ranks, nothing below 1.05x"
check "45: allreduce, 2 ranks, every size >= 1.05x NCCL" bench_np2_allreduce_float.csv all 1.05
check "45: allreduce, 2 ranks, every size >= 1.05x NCCL" bench_np2_allreduce_char.csv all 1.05
for c in bcast reduce allgather reduce_scatter alltoall alltoallv gather gatherv scatter scatterv; do
    check "45: $c, 2 ranks, every size >= 1.05x NCCL" bench_np2_${c}_float.csv all 1.05
done
exit $status

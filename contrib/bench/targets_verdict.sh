#!/usr/bin/env bash
# Issues 12 and 13's performance targets over the CSVs of
# contrib/bench/targets.sh (bench_np<N>_<collective>_<type>.csv in DIR):
#   contrib/bench/targets_verdict.sh DIR
# One line per target and CSV: the worst point and MET or MISSED; a missing
# CSV, or one without NCCL's numbers, is NOT RUN; a size whose loom result
# failed its check (loom-bench -c) is CHECK FAILED whatever its speed.
# ratio = loom busbw / NCCL busbw at the same size, so for a size >= 1 means
# loom's time <= NCCL's. "Per peer" is a call's smallest block: the average
# (bytes / ranks) for the equal-block forms, 2/(ranks + 1) of it for
# loom-bench's ragged v-forms. Exit status 0 when every target was measured
# and met, 1 otherwise.
set -uo pipefail
dir=${1:?usage: targets_verdict.sh DIR}
status=0
# check NAME CSV RANKS RULE LIMIT [ragged]: RULE picks the rows (bytes,
# per-peer bytes) and what must hold there: time8 (8 B time in us <= LIMIT),
# or min ratio >= LIMIT.
check() {
    local name=$1 csv=$dir/$2 np=$3 rule=$4 limit=$5 ragged=${6:-0}
    if [ ! -s "$csv" ]; then
        printf '%-58s %-34s NOT RUN\n' "$name" "$2"
        status=1
        return
    fi
    awk -F, -v name="$name" -v file="$2" -v np="$np" -v rule="$rule" -v limit="$limit" -v ragged="$ragged" '
        NR == 1 || $6 == "" { next }
        {
            b = $1 + 0; per = ragged ? b / np * 2 / (np + 1) : b / np; take = 0
            if (rule == "time8") take = b == 8
            else if (rule == "all") take = 1
            else if (rule == "mid") take = b >= 262144 && b <= 8388608
            else if (rule == "large") take = b >= 67108864
            else if (rule == "perpeer1M") take = per >= 1048576
            else if (rule == "upto64K") take = b <= 65536
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
echo "# issue 13: allreduce, blocking, same mpirun as NCCL"
for t in float char; do
    check "13: 4 ranks, 8 B <= 10 us" bench_np4_allreduce_$t.csv 4 time8 10
    check "13: 4 ranks, 256 KiB - 8 MiB >= 1.3x NCCL busbw" bench_np4_allreduce_$t.csv 4 mid 1.3
    check "13: 4 ranks, >= 64 MiB >= 1.10x NCCL busbw" bench_np4_allreduce_$t.csv 4 large 1.10
done
check "13: 2 ranks, no size below 1.0x" bench_np2_allreduce_float.csv 2 all 1.0
echo "# issue 12: all-peer and rooted collectives, 4 ranks, vs grouped ncclSend/ncclRecv"
for c in alltoall alltoallv gather gatherv scatter scatterv; do
    ragged=0
    case $c in *v) ragged=1;; esac
    check "12: $c, >= 1 MiB per peer >= 1.0x NCCL" bench_np4_${c}_char.csv 4 perpeer1M 1.0 $ragged
    check "12: $c, <= 64 KiB: time <= NCCL's" bench_np4_${c}_char.csv 4 upto64K 1.0 $ragged
done
exit $status

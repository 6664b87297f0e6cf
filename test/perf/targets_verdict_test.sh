#!/usr/bin/env bash
# contrib/bench/targets_verdict.sh over stored CSVs (4x H200, 2026-11-28 and
# 11-29: known verdicts) and over made-up ones (every target met, then
# points just under their lines): the verdict must say what the numbers say.
# (Output is matched through here-strings, not `echo | grep -q`: with
# pipefail, grep -q's early exit can kill the echo and fail a match.)
set -uo pipefail
S=${LOOM_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
V="$S/contrib/bench/targets_verdict.sh" R="$S/contrib/bench/results"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
expect() { # OUTPUT WHAT REGEX...: each regex must match a line
    local out=$1 what=$2
    shift 2
    for want in "$@"; do
        grep -Eq -- "$want" <<<"$out" || { echo "$out"; fail "$what: no line matching: $want"; }
    done
}
cp "$R/2026-11-28_h200x4_allreduce_float_fence_np4.csv" "$d/bench_np4_allreduce_float.csv"
cp "$R/2026-11-29_h200x2_allreduce_float_np2.csv" "$d/bench_np2_allreduce_float.csv"
cp "$R/2026-11-28_h200x4_alltoall_np4.csv" "$d/bench_np4_alltoall_char.csv"
out=$(bash "$V" "$d") && fail "stored CSVs: exit 0, but targets were missed or not run"
expect "$out" "stored CSVs" "256 KiB - 8 MiB >= 1.3x.*worst 1.181x at 8388608 B: MISSED" \
    "8 B <= 10 us.*worst 10.231 us at 8 B: MISSED" ">= 64 MiB >= 1.10x.*worst 1.018x at 536870912 B: MISSED" \
    "allreduce, 2 ranks.*bench_np2_allreduce_float.csv +worst 1.104x at 536870912 B: MET" \
    "alltoall, 4 ranks.*bench_np4_alltoall_char.csv +worst 1.044x at 268435456 B: MET" \
    "bench_np4_allreduce_char.csv +NOT RUN" "scatterv, 4 ranks.*bench_np4_scatterv_float.csv +NOT RUN"
# Made up: every size at 2x NCCL and 5 us, but for SIZE=RATIO pairs given.
made() { # FILE [SIZE=RATIO...]
    local f=$1 b r kv
    shift
    { echo "bytes,loom_us,loom_busbw_GBs,nccl_us,nccl_busbw_GBs,ratio,check"
      for b in 8 65536 262144 8388608 16777216 67108864; do
          r=2.0
          for kv in "$@"; do [ "${kv%=*}" = "$b" ] && r=${kv#*=}; done
          echo "$b,5.0,1.0,10.0,0.5,$r,ok"
      done; } > "$d/$f"
}
all() {
    rm -f "$d"/*.csv
    for t in float char; do
        for c in allreduce bcast reduce allgather reduce_scatter alltoall alltoallv gather gatherv scatter scatterv; do
            made bench_np4_${c}_$t.csv
        done
        made bench_np2_allreduce_$t.csv
    done
    for c in bcast reduce allgather reduce_scatter alltoall alltoallv gather gatherv scatter scatterv; do
        made bench_np2_${c}_float.csv
    done
}
all
out=$(bash "$V" "$d") || { echo "$out"; fail "every target met: exit non-zero"; }
grep -Eq "MISSED|NOT RUN|NO SIZES|CHECK FAILED" <<<"$out" && fail "every target met, yet: $(grep -Ev "MET$" <<<"$out")"
# Just under each line: 1.29x in the middle and 1.09x at 64 MiB (4-rank
# allreduce), 0.99x for the others at 4 ranks, 1.04x at 2 ranks (met at 4).
made bench_np4_allreduce_char.csv 8388608=1.29 16777216=1.0
made bench_np4_allreduce_float.csv 67108864=1.09 16777216=1.0
made bench_np4_reduce_scatter_float.csv 8=0.99
made bench_np4_gatherv_char.csv 16777216=0.99
made bench_np4_gather_char.csv 65536=1.04
made bench_np2_gather_float.csv 65536=1.04
made bench_np2_allreduce_char.csv 67108864=1.04
out=$(bash "$V" "$d") && fail "points under their lines: exit 0"
expect "$out" "points under their lines" \
    "256 KiB - 8 MiB >= 1.3x.*bench_np4_allreduce_char.csv +worst 1.290x at 8388608 B: MISSED" \
    ">= 64 MiB >= 1.10x.*bench_np4_allreduce_char.csv +worst 2.000x at 67108864 B: MET" \
    ">= 64 MiB >= 1.10x.*bench_np4_allreduce_float.csv +worst 1.090x at 67108864 B: MISSED" \
    "256 KiB - 8 MiB >= 1.3x.*bench_np4_allreduce_float.csv +worst 2.000x.*MET" \
    "reduce_scatter, 4 ranks.*_float.csv +worst 0.990x at 8 B: MISSED" \
    "gatherv, 4 ranks.*_char.csv +worst 0.990x at 16777216 B: MISSED" \
    "gather, 4 ranks.*bench_np4_gather_char.csv +worst 1.040x at 65536 B: MET" \
    "gather, 2 ranks.*bench_np2_gather_float.csv +worst 1.040x at 65536 B: MISSED" \
    "allreduce, 2 ranks.*bench_np2_allreduce_char.csv +worst 1.040x at 67108864 B: MISSED"
# A failed check wins over any speed; a CSV without NCCL's numbers is not a measurement.
all
sed -i 's/^65536,\(.*\),ok$/65536,\1,FAIL/' "$d/bench_np4_alltoall_char.csv"
sed -i 's/,10.0,0.5,2.0,ok$/,0.000,0.000,0.0000,ok/' "$d/bench_np2_allreduce_float.csv"
out=$(bash "$V" "$d") && fail "a failed check and a run without NCCL: exit 0"
expect "$out" "a failed check, no NCCL" "alltoall, 4 ranks.*bench_np4_alltoall_char.csv +CHECK FAILED at 65536 B" \
    "allreduce, 2 ranks.*bench_np2_allreduce_float.csv +NOT RUN \(no NCCL numbers\)"
echo "ok: the verdict follows the numbers"

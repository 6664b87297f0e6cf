#!/usr/bin/env bash
# contrib/bench/targets_verdict.sh over stored CSVs (4x H200, 2026-11-28 and
# 11-29: known verdicts) and over made-up ones (every target met, then one
# point just under its line): the verdict must say what the numbers say.
set -uo pipefail
S=${LOOM_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
V="$S/contrib/bench/targets_verdict.sh" R="$S/contrib/bench/results"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cp "$R/2026-11-28_h200x4_allreduce_float_fence_np4.csv" "$d/bench_np4_allreduce_float.csv"
cp "$R/2026-11-29_h200x2_allreduce_float_np2.csv" "$d/bench_np2_allreduce_float.csv"
cp "$R/2026-11-28_h200x4_alltoall_np4.csv" "$d/bench_np4_alltoall_char.csv"
out=$(bash "$V" "$d") && fail "stored CSVs: exit 0, but targets were missed or not run"
echo "$out"
for want in "256 KiB - 8 MiB >= 1.3x.*worst 1.181x at 8388608 B: MISSED" "8 B <= 10 us.*worst 10.231 us at 8 B: MISSED" \
    "2 ranks, no size below 1.0x.*worst 1.104x at 536870912 B: MET" "alltoall, >= 1 MiB per peer.*MET" \
    "bench_np4_allreduce_char.csv *NOT RUN" "scatterv, <= 64 KiB.*NOT RUN"; do
    echo "$out" | grep -Eq -- "$want" || fail "stored CSVs: no line matching: $want"
done
# Made up: every size at 2x NCCL and 5 us: every target met.
made() { # FILE RATIO_AT_1MiB_PER_PEER
    { echo "bytes,loom_us,loom_busbw_GBs,nccl_us,nccl_busbw_GBs,ratio,check"
      for b in 8 65536 262144 8388608 16777216 67108864; do
          r=2.0; [ "$b" = 16777216 ] && r=$2
          echo "$b,5.0,1.0,10.0,0.5,$r,ok"
      done; } > "$d/$1"
}
rm -f "$d"/*.csv
for t in float char; do made bench_np4_allreduce_$t.csv 2.0; done
made bench_np2_allreduce_float.csv 2.0
for c in alltoall alltoallv gather gatherv scatter scatterv; do made bench_np4_${c}_char.csv 2.0; done
out=$(bash "$V" "$d") || { echo "$out"; fail "every target met: exit non-zero"; }
echo "$out" | grep -Eq "MISSED|NOT RUN|NO SIZES" && fail "every target met, yet: $(echo "$out" | grep -E "MISSED|NOT RUN")"
made bench_np4_gatherv_char.csv 0.99 # 16 MiB at 4 ranks: 4 MiB per peer
out=$(bash "$V" "$d") && fail "gatherv at 0.99x: exit 0"
echo "$out" | grep -Eq "gatherv, >= 1 MiB per peer.*worst 0.990x at 16777216 B: MISSED" || fail "gatherv at 0.99x not MISSED"
echo "ok: the verdict follows the numbers"

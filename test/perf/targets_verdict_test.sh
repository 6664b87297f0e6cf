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
# A failed check wins over any speed; a CSV without NCCL's numbers is not a measurement.
made bench_np4_gatherv_char.csv 2.0
sed -i 's/^65536,\(.*\),ok$/65536,\1,FAIL/' "$d/bench_np4_alltoall_char.csv"
sed -i 's/,10.0,0.5,2.0,ok$/,0.000,0.000,0.0000,ok/' "$d/bench_np2_allreduce_float.csv"
out=$(bash "$V" "$d") && fail "a failed check and a run without NCCL: exit 0"
echo "$out" | grep -Eq "alltoall, <= 64 KiB.*CHECK FAILED at 65536 B" || fail "a failed check not reported"
echo "$out" | grep -Eq "2 ranks, no size below 1.0x.*NOT RUN \(no NCCL numbers\)" || fail "no NCCL numbers not reported"
# v-forms: per peer is the smallest block, 2/(n+1) of the average (0.4x at 4 ranks): 8 MiB at 4 ranks is 0.8 MiB.
made bench_np4_alltoallv_char.csv 2.0
sed -i 's/^8388608,\(.*\),2.0,ok$/8388608,\1,0.5,ok/' "$d/bench_np4_alltoallv_char.csv" "$d/bench_np4_alltoall_char.csv"
out=$(bash "$V" "$d")
echo "$out" | grep -Eq "alltoallv, >= 1 MiB per peer.*worst 2.000x at 16777216 B: MET" || fail "alltoallv judged at 0.8 MiB per peer"
echo "$out" | grep -Eq "alltoall, >= 1 MiB per peer.*worst 0.500x at 8388608 B: MISSED" || fail "alltoall not judged at 2 MiB per peer"
echo "ok: the verdict follows the numbers"

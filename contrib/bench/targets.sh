#!/usr/bin/env bash
# The measurements issue 45's speed targets are judged by (item 3; it takes
# in issues 12 and 13's), a part per device call on a 4-GPU host, then
# their verdict:
#   contrib/bench/targets.sh BUILDDIR [PART...]   (OUT=DIR: where the CSVs go, default .)
#   contrib/bench/targets_verdict.sh DIR          (here or there: MET / MISSED per target)
# PART (default: all of them, which will not fit one 10-minute call):
#   allreduce  4 ranks MPI_FLOAT and MPI_CHAR, 8 B - 512 MiB
#   rings      bcast, reduce, allgather, reduce_scatter: 4 ranks, float and char
#   exchanges  alltoall(v), gather(v), scatter(v): 4 ranks, char and float
#   two        every collective above at 2 ranks, float (allreduce char too)
# loom-bench against the system's libnccl.so.2 in the same mpirun
# (test/perf/run_bench.sh), NCCL_NVLS_ENABLE=0, one rank per GPU, every
# power of two (256 MiB the largest but for allreduce), so that each
# target's bounds (8 B, 256 KiB, 8 MiB, 64 MiB) are measured points. Each
# CSV is bench_np<N>_<collective>_<type>.csv.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
B=${1:?usage: targets.sh BUILDDIR [allreduce|rings|exchanges|two ...]}
shift
parts=${*:-allreduce rings exchanges two}
for p in $parts; do
    case $p in allreduce|rings|exchanges|two) ;; *) echo "targets.sh: no part '$p' (allreduce rings exchanges two)"; exit 2;; esac
done
export OUT=${OUT:-.}
rc=0
run() { # NP COLL TYPE FLAGS...
    local np=$1 coll=$2 type=$3
    shift 3
    LOOM_BENCH_FLAGS="-C $coll -T $type $*" LOOM_BENCH_TAG="_${coll}_$type" \
        bash "$top/test/perf/run_bench.sh" "$B" "$np" || rc=1
}
allreduce="-b 8 -e 536870912 -f 2 -n 50 -w 10" others="-b 8 -e 268435456 -f 2 -n 30 -w 5"
for p in $parts; do
    need=4
    [ "$p" = two ] && need=2
    ngpu=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU")
    if [ "$ngpu" -lt "$need" ]; then echo "targets.sh: part $p needs $need GPUs, found $ngpu"; rc=77; continue; fi
    case $p in
    allreduce) for t in float char; do run 4 allreduce $t $allreduce; done;;
    rings) for c in bcast reduce allgather reduce_scatter; do for t in float char; do run 4 $c $t $others; done; done;;
    exchanges) for c in alltoall alltoallv gather gatherv scatter scatterv; do
                   for t in char float; do run 4 $c $t $others; done
               done;;
    two) run 2 allreduce float $allreduce
         run 2 allreduce char $allreduce
         for c in bcast reduce allgather reduce_scatter alltoall alltoallv gather gatherv scatter scatterv; do
             run 2 $c float $others
         done;;
    esac
done
bash "$top/contrib/bench/targets_verdict.sh" "$OUT" || true
exit $rc

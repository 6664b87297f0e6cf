#!/usr/bin/env bash
# The measurements issues 12 and 13 are judged by, in one or two calls on a 4-GPU
# host (not yet run there; its duration is unknown), then their verdict:
#   contrib/bench/targets.sh BUILDDIR [allreduce|exchanges]   (OUT=DIR: where the CSVs go, default .;
#                                                             one part per device call if both do not fit)
#   contrib/bench/targets_verdict.sh DIR          (here or there: MET / MISSED per target)
# loom-bench against the system's libnccl.so.2 in the same mpirun
# (test/perf/run_bench.sh), NCCL_NVLS_ENABLE=0, one rank per GPU:
#   allreduce MPI_FLOAT and MPI_CHAR at 4 ranks, MPI_FLOAT at 2, 8 B - 512 MiB;
#   alltoall(v), gather(v), scatter(v) MPI_CHAR at 4 ranks, 8 B - 256 MiB;
# every power of two, so that each target's bounds (8 B, 64 KiB, 256 KiB,
# 8 MiB, 64 MiB, 1 MiB per peer) are measured points.
# Each CSV is bench_np<N>_<collective>_<type>.csv.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
B=${1:?usage: targets.sh BUILDDIR [allreduce|exchanges]}
part=${2:-all}
export OUT=${OUT:-.}
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU")
[ "$ngpu" -ge 4 ] || { echo "targets.sh: needs 4 GPUs, found $ngpu"; exit 77; }
rc=0
run() { # NP COLL TYPE FLAGS...
    local np=$1 coll=$2 type=$3
    shift 3
    LOOM_BENCH_FLAGS="-C $coll -T $type $*" LOOM_BENCH_TAG="_${coll}_$type" \
        bash "$top/test/perf/run_bench.sh" "$B" "$np" || rc=1
}
if [ "$part" != exchanges ]; then
    allreduce="-b 8 -e 536870912 -f 2 -n 50 -w 10"
    run 4 allreduce float $allreduce
    run 4 allreduce char $allreduce
    run 2 allreduce float $allreduce
fi
if [ "$part" != allreduce ]; then
    for coll in alltoall alltoallv gather gatherv scatter scatterv; do
        run 4 $coll char -b 8 -e 268435456 -f 2 -n 30 -w 5
    done
fi
bash "$top/contrib/bench/targets_verdict.sh" "$OUT" || true
exit $rc

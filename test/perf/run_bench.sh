#!/usr/bin/env bash
# loom-bench on a GPU host, loom vs NCCL in the same run, for each rank count:
#   test/perf/run_bench.sh BUILDDIR NP [NP...]     (extra loom-bench flags: LOOM_BENCH_FLAGS)
# CSV files go to $OUT (if set) or the current directory as bench_np<N>.csv.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
B=$(cd "$1" && pwd)
shift
pk=$(ompi_info --path pkglibdir | sed -n 's/.*Pkglibdir: *//p')
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
nvidia-smi -L
# Forward whichever LOOM_* tunables are set.
fwd=
for v in $(env | sed -n 's/^\(LOOM_[A-Z_]*\)=.*/\1/p'); do fwd="$fwd -x $v"; done
rc=0
for np in "$@"; do
    # shellcheck disable=SC2086
    timeout 480 mpirun -np "$np" --bind-to none -x NCCL_NVLS_ENABLE $fwd \
        --mca mca_base_component_path "$B/.libs:$pk" \
        "$B/loom-bench" -c --csv "${OUT:-.}/bench_np$np.csv" ${LOOM_BENCH_FLAGS:-} || rc=1
done
exit $rc

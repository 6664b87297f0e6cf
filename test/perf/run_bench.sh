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
# Forward whichever LOOM_*, NCCL_* and UCX_* settings are set (the same for both).
fwd=
for v in $(env | sed -n 's/^\(\(LOOM\|NCCL\|UCX\)_[A-Z0-9_]*\)=.*/\1/p'); do fwd="$fwd -x $v"; done
# The component alone in a folder (see test/run_test.sh).
comp=$(mktemp -d)
trap 'rm -rf "$comp"' EXIT
cp "$B/.libs/mca_coll_loom.so" "$comp/"
rc=0
for np in "$@"; do
    # shellcheck disable=SC2086
    timeout 480 mpirun -np "$np" --bind-to none $fwd \
        --mca mca_base_component_path "$comp:$pk" \
        "$B/loom-bench" -c --csv "${OUT:-.}/bench_np$np${LOOM_BENCH_TAG:-}.csv" ${LOOM_BENCH_FLAGS:-} || rc=1
done
exit $rc

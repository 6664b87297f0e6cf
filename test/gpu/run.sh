#!/usr/bin/env bash
# GPU tests on a GPU host, from a build tree made elsewhere (no autotools,
# Check or network needed there):   test/gpu/run.sh [BUILDDIR [NAME...]]
# (default: build; NAMEs: only the tests whose names start so, e.g.
# coll_exchange dead_peer). test/gpu/bundle.sh makes a BUILDDIR small
# enough to carry. LOOM_GPU_SHARING=1 runs multi-GPU tests on fewer GPUs;
# LOOM_GPU_MPS=1 runs CUDA's MPS daemon for the run (started here, stopped
# after, unless one already ran) and sets LOOM_GPU_SHARING=1 unless given,
# so ranks sharing a GPU run side by side (and use the resident kernel)
# instead of taking turns.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
B=$(cd "${1:-$top/build}" && pwd)
export LOOM_BUILDDIR=$B LOOM_SRCDIR=$top LOOM_MPIRUN=${LOOM_MPIRUN:-mpirun}
export LOOM_OMPI_PKGLIBDIR=${LOOM_OMPI_PKGLIBDIR:-$(ompi_info --path pkglibdir | sed -n 's/.*Pkglibdir: *//p')}
export NCCL_NVLS_ENABLE=0
# Each test well under a lent host's 600 s per call: one hang must not eat the rest.
export LOOM_TEST_TIMEOUT=${LOOM_TEST_TIMEOUT:-180}
nvidia-smi -L 2>/dev/null || echo "(nvidia-smi not found)"
if [ "${LOOM_GPU_MPS:-0}" = 1 ]; then
    export LOOM_GPU_SHARING=${LOOM_GPU_SHARING:-1} # what MPS is for here
    if ! echo get_server_list | nvidia-cuda-mps-control >/dev/null 2>&1; then
        nvidia-cuda-mps-control -d || { echo "LOOM_GPU_MPS=1: nvidia-cuda-mps-control -d failed"; exit 1; }
        trap 'echo quit | nvidia-cuda-mps-control' EXIT
        echo "CUDA MPS daemon started for this run"
    fi
fi
pass=0 fail=0 skip=0
shift $(($# > 0 ? 1 : 0))
picked() { [ $# -eq 0 ] && return 0; local n; for n in "$@"; do case $(basename "$t") in "$n"*) return 0;; esac; done; return 1; }
for t in "$top"/test/gpu/*.mpitest; do
    picked "$@" || continue
    echo "=== $(basename "$t")"
    bash "$top/test/run_test.sh" "$t"
    case $? in 0) pass=$((pass + 1));; 77) skip=$((skip + 1));; *) fail=$((fail + 1));; esac
done
t=dead_peer.sh
if picked "$@"; then
    echo "=== dead_peer.sh (a peer killed mid-collective: p2p, shm, net)"
    bash "$top/test/gpu/dead_peer.sh"
    case $? in 0) pass=$((pass + 1));; 77) skip=$((skip + 1));; *) fail=$((fail + 1));; esac
fi
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]

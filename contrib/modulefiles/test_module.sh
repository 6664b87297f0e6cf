#!/usr/bin/env bash
# CI: install loom from BUILDDIR under a fresh prefix (its component outside
# Open MPI's own directory), then `module load loom` (Lmod) and a plain
# mpirun of loom-demo must select loom; `module unload loom` must restore
# the environment. The prefix is removed at the end.
#   contrib/modulefiles/test_module.sh BUILDDIR
set -uo pipefail
B=$(cd "${1:-build}" && pwd)
init=
for f in /usr/share/lmod/lmod/init/bash /usr/share/lmod/*/init/bash; do [ -r "$f" ] && { init=$f; break; }; done
[ -n "$init" ] || { echo "SKIP: Lmod is not installed (apt-get install lmod)"; exit 77; }
pfx=$(mktemp -d)
trap 'rm -rf "$pfx"' EXIT
make -C "$B" install prefix="$pfx" ompicomponentdir="$pfx/lib/openmpi" >"$pfx.log" 2>&1 ||
    { cat "$pfx.log"; echo "FAIL: make install under $pfx"; exit 1; }
rm -f "$pfx.log"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
unset OMPI_MCA_mca_base_component_path
# Without the module a plain mpirun must not find loom (else this proves nothing).
if OMPI_MCA_coll_loom_verbose=1 timeout 300 mpirun -np 2 --oversubscribe "$pfx/bin/loom-demo" 2>&1 |
    grep -c "coll/loom.*: selected" >/dev/null; then
    echo "SKIP: a coll/loom is already in Open MPI's own component directory"; exit 77
fi
# shellcheck disable=SC1090
source "$init"
module use "$pfx/share/modulefiles"
module load loom || { echo "FAIL: module load loom"; exit 1; }
echo "module load loom: OMPI_MCA_mca_base_component_path=$OMPI_MCA_mca_base_component_path"
[ "$(command -v loom-demo)" = "$pfx/bin/loom-demo" ] || { echo "FAIL: loom-demo is not the module's"; exit 1; }
out=$(OMPI_MCA_coll_loom_verbose=1 timeout 300 mpirun -np 2 --oversubscribe loom-demo 2>&1)
rc=$?
echo "$out" | grep -E 'loom-demo|MPI_COMM_WORLD.*(selected|allreduce)' | sort -u
[ $rc -eq 0 ] || { echo "$out" | tail -20; echo "FAIL: mpirun loom-demo exited with $rc"; exit 1; }
echo "$out" | grep -c "MPI_COMM_WORLD.*: selected" >/dev/null || { echo "FAIL: plain mpirun did not select loom"; exit 1; }
module unload loom
[ -z "${OMPI_MCA_mca_base_component_path:-}" ] || { echo "FAIL: module unload left $OMPI_MCA_mca_base_component_path"; exit 1; }
echo "ok: module load loom; plain mpirun selects loom; module unload restores the environment"

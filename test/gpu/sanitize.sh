#!/usr/bin/env bash
# compute-sanitizer over reduced GPU matrices, 2 ranks, on a GPU host:
#   test/gpu/sanitize.sh [BUILDDIR] [TOOLS] [TRANSPORTS]
# TOOLS: any of memcheck racecheck synccheck (default all three);
# TRANSPORTS: any of p2p shm net (default all three). Each (tool, transport)
# runs test/gpu/coll_compound and test/gpu/coll_matrix -q (every kernel:
# one-shot, rings and chains, Simple; LOOM_LL_RING_MAX_BYTES adds the LL ring)
# under mpirun; a sanitizer report or a wrong element fails the run.
# LOOM_SANITIZE_ENV: "K=V ..." set on every rank (e.g. LOOM_ALGO=ll128_ring).
# LOOM_SANITIZE_PROGS: other programs, ';'-separated (e.g. "test/gpu/coll_exchange -m kinds;test/gpu/coll_rooted").
# Limits per program: LOOM_SANITIZE_TIMEOUT seconds (default 600).
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
B=$(cd "${1:-$top/build}" && pwd)
tools=${2:-memcheck racecheck synccheck}
transports=${3:-p2p shm net}
CS=${COMPUTE_SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}
[ -x "$CS" ] || CS=$(command -v compute-sanitizer) || { echo "SKIP: compute-sanitizer not found"; exit 77; }
pk=$(ompi_info --path pkglibdir | sed -n 's/.*Pkglibdir: *//p')
comp=$(mktemp -d)
log=$(mktemp)
trap 'rm -rf "$comp" "$log"' EXIT
cp "$B/.libs/mca_coll_loom.so" "$comp/"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
env_of() {
    case $1 in
    p2p) echo "";;
    shm) echo "LOOM_P2P_DISABLE=1";;
    net) echo "LOOM_FAKE_NODES=1 LOOM_NET=ucx UCX_TLS=tcp UCX_NET_DEVICES=lo";;
    esac
}
fails=0
for tool in $tools; do
    for tr in $transports; do
        fwd=
        for kv in ${LOOM_SANITIZE_ENV:-} $(env_of "$tr"); do export "${kv?}"; fwd="$fwd -x ${kv%%=*}"; done
        IFS=";" read -r -a progs <<<"${LOOM_SANITIZE_PROGS:-test/gpu/coll_compound;test/gpu/coll_matrix -q}"
        for prog in "${progs[@]}"; do
            start=$(date +%s)
            # shellcheck disable=SC2086
            timeout "${LOOM_SANITIZE_TIMEOUT:-600}" mpirun -np 2 --bind-to none -x NCCL_NVLS_ENABLE $fwd \
                --mca mca_base_component_path "$comp:$pk" \
                "$CS" --tool "$tool" --error-exitcode 9 --print-limit 20 $B/$prog >"$log" 2>&1
            rc=$?
            summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | sort -u | tr '\n' ' ')
            echo "$tool $tr $prog: rc $rc, $(( $(date +%s) - start )) s: $summary"
            if [ $rc -ne 0 ]; then
                fails=$((fails + 1))
                grep -E "=========|wrong" "$log" | head -40
            fi
        done
        for kv in ${LOOM_SANITIZE_ENV:-} $(env_of "$tr"); do unset "${kv%%=*}"; done
    done
done
echo "sanitize: $fails failed"
[ $fails -eq 0 ]

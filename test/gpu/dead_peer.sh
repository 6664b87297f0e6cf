#!/usr/bin/env bash
# A peer killed mid-collective over p2p, shm and the net transport (fake
# hosts, ucx; again with an arrival board per pretend host), and on the
# resident kernel: test/gpu/dead_peer.cc, a fork-based launcher on loom's C API.
# Skips (77) where there are fewer than 2 GPUs. LOOM_BUILDDIR: the build tree.
# LOOM_DEAD_PEER_RUNS=N: N more runs of each mode with seeds 1..N (mixed
# collectives, the kill at a point each seed picks); prints the counts.
set -u
B=${LOOM_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)/build}
fails=0 runs=0
for mode in p2p shm net hosts resident; do
    for seed in 0 $(seq 1 "${LOOM_DEAD_PEER_RUNS:-0}"); do
        timeout 300 "$B/test/gpu/dead_peer" "$mode" "$seed"
        case $? in
            0) ;;
            77) exit 77;;
            *) fails=$((fails + 1)); echo "FAIL: dead_peer $mode $seed";;
        esac
        runs=$((runs + 1))
    done
done
echo "dead_peer.sh: $runs runs, $fails failed"
[ $fails -eq 0 ]

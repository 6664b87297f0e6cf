#!/usr/bin/env bash
# A peer killed mid-collective over p2p, shm and the net transport (fake
# hosts, ucx; again with an arrival board per pretend host), and on the
# resident kernel: test/gpu/dead_peer.cc, a fork-based launcher on loom's C API.
# Skips (77) where there are fewer than 2 GPUs. LOOM_BUILDDIR: the build tree.
set -u
B=${LOOM_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)/build}
fails=0
for mode in p2p shm net hosts resident; do
    timeout 300 "$B/test/gpu/dead_peer" "$mode"
    case $? in
        0) ;;
        77) exit 77;;
        *) fails=$((fails + 1));;
    esac
done
[ $fails -eq 0 ]

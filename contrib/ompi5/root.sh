#!/usr/bin/env bash
# A Debian 13 (trixie: Open MPI 5.0) root for building and testing loom
# against Open MPI 5.0 on a Debian 12 machine, from Debian's packages only:
#   contrib/ompi5/root.sh DIR                  make DIR (once; a stamp marks it done)
#   contrib/ompi5/root.sh DIR -- CMD [ARG...]  run CMD in it, in this checkout
# The checkout is bound at its own path, the host's CUDA toolkit at
# /usr/local/cuda (nvcc runs under trixie's gcc 14), and /proc, /sys, /dev,
# /dev/shm (Open MPI's shared memory, UCX's devices). Needs root and
# mmdebstrap (or debootstrap). Open MPI 5.0's source tree, for the headers
# its packages lack, goes to /usr/src/openmpi-VERSION, where configure finds it.
set -euo pipefail
root=${1:?usage: root.sh DIR [-- CMD...]}
shift
top=$(cd "$(dirname "$0")/../.." && pwd)
pkgs="libopenmpi-dev,openmpi-bin,libpmix-dev,check,libhwloc-dev,libibverbs-dev,libucx-dev,build-essential"
pkgs="$pkgs,autoconf,automake,libtool,pkg-config,dpkg-dev,debhelper,ca-certificates,procps,file,ccache"
mirror=${LOOM_DEBIAN_MIRROR:-http://deb.debian.org/debian}
if [ ! -f "$root/.loom-root" ]; then
    # A half-made root is made again; never through a bind mount left behind.
    if grep -q " $(readlink -m "$root")/" /proc/mounts; then
        echo "root.sh: $root has mounts inside it (a run was killed?): unmount them first" >&2; exit 1
    fi
    rm -rf --one-file-system "$root"
    if command -v mmdebstrap >/dev/null; then
        mmdebstrap --quiet --variant=apt --include="$pkgs" trixie "$root" "deb $mirror trixie main" >&2
    else
        debootstrap --variant=buildd --include="$pkgs" trixie "$root" "$mirror" >&2
    fi
    mkdir -p "$root$top" "$root/usr/local/cuda"
    cp "$top/contrib/ompi5/get_source.sh" "$root/usr/local/bin/loom-ompi-source"
    chroot "$root" bash -c 'loom-ompi-source /usr/src >/dev/null' >&2
    touch "$root/.loom-root"
    echo "root.sh: Debian 13 root ready in $root ($(chroot "$root" ompi_info --version 2>/dev/null | grep -m1 "Open MPI"))" >&2
fi
[ "${1:-}" = "--" ] || exit 0
shift
binds=("/proc" "/sys" "/dev" "/dev/shm" "$top")
[ -d /usr/local/cuda ] && binds+=("/usr/local/cuda")
# The caller's ccache (CCACHE_DIR set), bound at its own path: the builds in
# the root share objects (nvcc through a wrapper: configure takes a preset
# NVCC only as an absolute path). Trixie's compilers hash apart from the host's.
envs=() path=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin
if [ -n "${CCACHE_DIR:-}" ] && [ -x "$root/usr/bin/ccache" ]; then
    mkdir -p "$CCACHE_DIR"
    binds+=("$CCACHE_DIR")
    envs+=("CCACHE_DIR=$CCACHE_DIR" "CCACHE_NOHASHDIR=1" "CCACHE_BASEDIR=$top")
    path=/usr/lib/ccache:$path
    if [ -d /usr/local/cuda ]; then
        printf '#!/bin/sh\nexec ccache /usr/local/cuda/bin/nvcc "$@"\n' >"$root/usr/local/bin/nvcc-ccache"
        chmod +x "$root/usr/local/bin/nvcc-ccache"
        envs+=("NVCC=/usr/local/bin/nvcc-ccache")
    fi
fi
mounted=()
cleanup() { local i; for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null || true; done; }
trap cleanup EXIT
for d in "${binds[@]}"; do
    mkdir -p "$root$d"
    mount --bind "$(readlink -f "$d")" "$root$d"
    mounted+=("$root$d")
done
# shellcheck disable=SC2016
chroot "$root" env -i HOME=/root PATH="$path" TERM=dumb "${envs[@]}" \
    ${CI:+CI=$CI} bash -c 'cd "$1" && shift && exec "$@"' loom-root "$top" "$@"

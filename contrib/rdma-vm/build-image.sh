#!/bin/sh
# Builds (once, cached) the kernel and initramfs of loom's soft-RoCE test VM:
# Debian's own kernel has rdma_rxe, so a QEMU guest of it gives a real kernel
# RDMA stack (rxe0, RoCE v2) on machines without RDMA hardware.
#
#   contrib/rdma-vm/build-image.sh        prints the cache directory on success
#
# Needs (Debian 12): qemu-system-x86 busybox-static rdma-core ibverbs-utils kmod cpio xz-utils.
# The kernel version is pinned in KERNEL_VERSION; if Debian no longer serves it,
# the current linux-image-amd64 is used and a warning says so.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
KV=$(cat "$HERE/KERNEL_VERSION")
CACHE=${LOOM_RDMA_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/loom-rdma-vm}
for tool in qemu-system-x86_64 busybox modprobe depmod cpio xz; do
    command -v $tool >/dev/null || { echo "build-image: $tool missing: apt-get install qemu-system-x86 busybox-static rdma-core ibverbs-utils kmod cpio xz-utils" >&2; exit 2; }
done
mkdir -p "$CACHE"
cd "$CACHE"
# The .deb stays in the cache: the image is rebuilt from it when guest-init changes.
if ! ls linux-image-"$KV"_*_amd64.deb >/dev/null 2>&1; then
    if ! timeout 300 apt-get download "linux-image-$KV" >/dev/null 2>&1; then
        NEW=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/{sub("linux-image-","",$2); print $2}')
        echo "build-image: warning: linux-image-$KV is not served any more; using $NEW" >&2
        KV=$NEW
        ls linux-image-"$KV"_*_amd64.deb >/dev/null 2>&1 || timeout 300 apt-get download "linux-image-$KV" >/dev/null
    fi
fi
D=$CACHE/$KV
# The initramfs carries guest-init: rebuilt when that changes.
SUM=$(cksum "$HERE/guest-init" | cut -d' ' -f1)
[ "$(cat "$D/init.sum" 2>/dev/null)" = "$SUM" ] || rm -f "$D/initrd.gz"
if [ ! -f "$D/vmlinux" ] || [ ! -f "$D/initrd.gz" ]; then
    rm -rf "$D"; mkdir -p "$D"
    dpkg -x linux-image-"${KV}"_*_amd64.deb "$D/root"   # unpacked here, never installed
    depmod -b "$D/root" "$KV"
    # An uncompressed vmlinux boots through PVH, skipping the guest's own xz decompression.
    off=$(LC_ALL=C grep -obUaP '\xFD7zXZ' "$D/root/boot/vmlinuz-$KV" | head -n 1 | cut -d: -f1)
    tail -c +$((off + 1)) "$D/root/boot/vmlinuz-$KV" | xz -dc --single-stream >"$D/vmlinux.tmp" 2>/dev/null || true
    mv "$D/vmlinux.tmp" "$D/vmlinux"
    mkdir -p "$D/irfs/bin" "$D/irfs/modules"
    cp "$(command -v busybox)" "$D/irfs/bin/busybox"
    cp "$HERE/guest-init" "$D/irfs/init"
    chmod +x "$D/irfs/init"
    # rdma_rxe needs the crc32 shash at link-add time: crc32_generic, or "No such file or directory".
    for m in crc32_generic rdma_rxe rdma_ucm ib_uverbs 9p 9pnet_virtio virtio_pci dummy; do
        modprobe -d "$D/root" -S "$KV" --show-depends $m
    done | awk '$1=="insmod"{print $2}' | awk '!seen[$0]++' | while read -r f; do
        cp "$f" "$D/irfs/modules/"
        basename "$f" >>"$D/irfs/modules/order"
    done
    (cd "$D/irfs" && find . | cpio -o -H newc --quiet | gzip -1) >"$D/initrd.gz"
    echo "$SUM" >"$D/init.sum"
    rm -rf "$D/root" "$D/irfs"
fi
echo "$D"

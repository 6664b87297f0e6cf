#!/bin/sh
# Runs a command inside loom's soft-RoCE test VM (rxe0, RoCE v2 on 192.168.77.1,
# GID index 1 is its IPv4 GID) and exits with its status.
#
#   contrib/rdma-vm/run.sh WORKDIR COMMAND...
#
# WORKDIR is shared read-write at the same path (build there: the guest's
# /tmp is its own); the host's root is visible read-only. The command runs as
# root from WORKDIR. Env: LOOM_RDMA_VM_LIMIT (s, default 300) bounds the
# command, the VM gets 60 s more. Status 99: the VM did not finish.
# Speed under QEMU's TCG means nothing: use this for correctness only.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 2 ] || { echo "usage: $0 WORKDIR COMMAND..." >&2; exit 2; }
WORK=$(cd "$1" && pwd); shift
LIMIT=${LOOM_RDMA_VM_LIMIT:-300}
IMG=$("$HERE/build-image.sh" | tail -n 1)
printf '%s\n' "$*" >"$WORK/.guest.cmd"
rm -f "$WORK/.guest.rc" "$WORK/.guest.log"
if [ -w /dev/kvm ] && grep -qwE 'vmx|svm' /proc/cpuinfo; then ACC="-accel kvm -cpu host"; else ACC="-accel tcg,thread=multi -cpu max"; fi
timeout $((LIMIT + 60)) qemu-system-x86_64 $ACC -m 1024 -smp 2 -M q35 -nographic -no-reboot -no-user-config \
    -bios /usr/share/qemu/qboot.rom -kernel "$IMG/vmlinux" -initrd "$IMG/initrd.gz" \
    -append "console=ttyS0 quiet loglevel=3 panic=-1 loom_work=$WORK loom_limit=$LIMIT" \
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
    -virtfs local,path="$WORK",mount_tag=work,security_model=none,multidevs=remap \
    -nic none </dev/null >"$WORK/.qemu.log" 2>&1 || true
[ -f "$WORK/.guest.log" ] && cat "$WORK/.guest.log"
if [ ! -f "$WORK/.guest.rc" ]; then
    echo "rdma-vm: the VM did not finish (console log: $WORK/.qemu.log)" >&2
    exit 99
fi
rc=$(cat "$WORK/.guest.rc")
[ "$rc" = 98 ] && echo "rdma-vm: 'rdma link add rxe0' failed in the guest" >&2
exit "$rc"

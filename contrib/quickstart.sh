#!/usr/bin/env bash
# All set-up on a fresh Debian/Ubuntu machine, then one of:
#   contrib/quickstart.sh demo   build, install, run loom-demo under mpirun
#   contrib/quickstart.sh test   build, run the test suite (make check; LOOM_CHECK=check-full: every size)
# Environment: LOOM_CONFIGURE_FLAGS (extra ./configure flags), LOOM_NP (demo ranks),
# LOOM_BUILD (build folder, default build; e.g. LOOM_BUILD=build-asan
# LOOM_CONFIGURE_FLAGS=--enable-sanitizers ... test: the suite under ASan + UBSan).
set -euo pipefail
mode=${1:-demo}
case "$mode" in demo|test) ;; *) echo "usage: $0 demo|test" >&2; exit 2;; esac
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo

# 1. Packages (only what is missing; needs apt-get and network).
pkgs="autoconf automake libtool make pkg-config g++ python3 libopenmpi-dev openmpi-bin check libhwloc-dev libibverbs-dev libucx-dev"
missing=
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if ! { [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc >/dev/null 2>&1; }; then
    missing="$missing nvidia-cuda-toolkit"
fi
if [ -n "$missing" ]; then
    echo "quickstart: installing:$missing"
    $SUDO apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi
cuda_flag=
if [ ! -x /usr/local/cuda/bin/nvcc ] && command -v nvcc >/dev/null 2>&1; then
    cuda_flag="--with-cuda=$(dirname "$(dirname "$(command -v nvcc)")")"
fi

# GPU code for this machine's GPUs; packagers and `./configure` alone get
# every GPU line from A100 on. `test` where no GPU answers runs no GPU code:
# PTX only (compute_90), which builds in about half the time of SASS.
arch_flag=--with-cuda-arch=native
if [ "$mode" = test ] && ! nvidia-smi -L >/dev/null 2>&1; then arch_flag=--with-cuda-arch=compute_90; fi
case " ${LOOM_CONFIGURE_FLAGS:-} " in *" --with-cuda-arch="*) arch_flag=;; esac

# 2. Build in build/ (or $LOOM_BUILD).
[ -x configure ] || ./autogen.sh
bdir=${LOOM_BUILD:-build}
mkdir -p "$bdir"
# Open MPI 5.0's packages lack internal headers a component needs: its
# source package gives them (fetched once, into the build folder).
ompi_ver=$(ompi_info --version 2>/dev/null | sed -n 's/.*Open MPI v\([0-9.]*\).*/\1/p' | head -n 1)
case "$ompi_ver" in
5.*)
    if [ ! -f "/usr/src/openmpi-$ompi_ver/ompi/mca/coll/coll.h" ] && [ ! -f "$bdir/openmpi-$ompi_ver/ompi/mca/coll/coll.h" ]; then
        dpkg -s dpkg-dev >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq dpkg-dev >/dev/null
        echo "quickstart: Open MPI $ompi_ver: fetching its source package for the headers its install lacks"
        bash contrib/ompi5/get_source.sh "$bdir" >/dev/null
    fi;;
esac
cd "$bdir"
if [ ! -f Makefile ]; then
    # shellcheck disable=SC2086
    ../configure $cuda_flag $arch_flag ${LOOM_CONFIGURE_FLAGS:-} | tail -n 12
fi
jobs=$(nproc 2>/dev/null || echo 2)
make -j"$jobs" >/dev/null

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
if [ "$mode" = test ]; then
    rc=0
    make -j"$jobs" "${LOOM_CHECK:-check}" >check.out 2>&1 || rc=$?
    grep -E '^(PASS|FAIL|SKIP|XFAIL|XPASS|ERROR):' check.out || true
    for f in $(grep -lE '^(FAIL|ERROR)' test/*/*.log 2>/dev/null); do echo "=== $f"; cat "$f"; done
    # Reasons for skipped tests stay visible.
    grep -h '^SKIP: ' test/*/*.log 2>/dev/null | grep -v '^SKIP: test/' || true
    np=$(grep -c '^PASS:' check.out || true); nf=$(grep -cE '^(FAIL|ERROR|XPASS):' check.out || true)
    ns=$(grep -c '^SKIP:' check.out || true)
    echo "$np passed, $nf failed, $ns skipped"
    exit $rc
fi

# demo: install (component into Open MPI's component directory), then run.
$SUDO make install | grep '^loom:' || true
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
np=${LOOM_NP:-$([ "$ngpu" -ge 2 ] && echo "$ngpu" || echo 4)}
prefix=$(sed -n 's/^prefix = //p' Makefile)
compdir=$(sed -n 's/^ompicomponentdir = //p' Makefile | sed "s#\${libdir}#$prefix/lib#")
pkglibdir=$(sed -n 's/^OMPI_PKGLIBDIR = //p' Makefile)
echo "quickstart: mpirun -np $np loom-demo (coll_loom_verbose=1 shows loom's choices)"
mpirun -np "$np" --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE \
    --mca mca_base_component_path "$compdir:$pkglibdir" --mca coll_loom_verbose 1 \
    "$prefix/bin/loom-demo" 2>&1 | grep -E 'loom-demo|MPI_COMM_WORLD.*(selected|allreduce)' | sort -u

#!/bin/bash
# Builds MPICH's collective tests (test/mpi/coll, with its DTPools datatype
# library and MTest utilities) against this machine's MPI (mpicc), with
# CUDA memory types, into OUTDIR with run.sh and the testlists, to run
# through loom on device buffers (docs/testing.md, third-party test suites).
#
#   contrib/mpich_tests/build.sh MPICH_SRC OUTDIR
#
# MPICH_SRC: an MPICH source tree; v4.3.2 was used
#   (git clone -b v4.3.2 --depth 1 https://github.com/pmodels/mpich).
# Only test/mpi, confdb and maint/version.m4 are read. CUDA_HOME (default /usr/local/cuda).
# mtest_common-nogpu.patch: MTest asked CUDA for devices at every allocation
# and assert()ed; now only for GPU memory types, with a clear abort.
# Tests that need MPI-4 (persistent collectives MPI_*_init, large-count
# MPI_*_c) do not link against Open MPI 4.1 and are left out; against Open
# MPI 5.0 (its mpicc first in PATH) the persistent ones build too (147
# tests with 5.0.7).
set -eu
[ $# -eq 2 ] || { echo "usage: $0 MPICH_SRC OUTDIR" >&2; exit 2; }
src=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
work=$(mktemp -d)
mkdir -p "$work/src/test" "$work/src/maint"
cp -r "$src/confdb" "$work/src/confdb"
cp "$src/maint/version.m4" "$work/src/maint/"
cp -r "$src/test/mpi" "$work/src/test/mpi"
patch -d "$work/src/test/mpi" -p0 < "$here/mtest_common-nogpu.patch"
(cd "$work/src/test/mpi" && ./autogen.sh) > "$work/autogen.log" 2>&1
mkdir -p "$work/build"
cd "$work/build"
"$work/src/test/mpi/configure" CC=mpicc MPICC=mpicc --with-mpi="$(dirname "$(dirname "$(command -v mpicc)")")" \
    --with-cuda="$cuda" --enable-strictmpi --disable-fortran --disable-cxx --disable-spawn --disable-romio \
    --disable-ft-tests --disable-perftest --disable-checkpointing --disable-threadcomm --disable-part \
    > "$work/configure.log" 2>&1
make -C dtpools -j2 > "$work/dtp.log" 2>&1
make -C util -j2 > "$work/util.log" 2>&1
# -k: the MPI-4 tests fail to link; the rest build.
make -C coll -k -j2 LDFLAGS='-Wl,-rpath,\$$ORIGIN/lib' > "$work/coll.log" 2>&1 || true
mkdir -p "$out/coll/lib"
n=0
for f in coll/*; do
    [ -f "$f" ] && [ -x "$f" ] && file "$f" | grep -q ELF || continue
    strip --strip-debug -o "$out/coll/$(basename "$f")" "$f"
    n=$((n + 1))
done
cp -L "$cuda"/lib64/libcudart.so.[0-9]* "$out/coll/lib/" 2>/dev/null || true
cp "$here/run.sh" "$here/testlist.device" "$out/"
echo "built $n coll tests into $out (logs in $work)"

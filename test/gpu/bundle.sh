#!/usr/bin/env bash
# What a GPU host needs of a build tree to run the GPU suite, stripped, in
# the build tree's own layout (test/gpu/run.sh OUT runs it there):
#   test/gpu/bundle.sh [BUILDDIR] OUT
# The component alone is ~40 MB with its debug symbols; a lent GPU host
# takes 64 MiB of carried files per call.
set -euo pipefail
[ $# -eq 1 ] && set -- build "$1"
B=$1 O=$2
[ -f "$B/.libs/mca_coll_loom.so" ] || { echo "bundle: no $B/.libs/mca_coll_loom.so (build first)" >&2; exit 1; }
[ -x "$B/test/gpu/coll_matrix" ] || { echo "bundle: no GPU test programs in $B (make gpu-tests first)" >&2; exit 1; }
# `make gpu-tests` links the test programs, not the libraries the tests
# load: a bundle made after it alone carries the last `make`'s libraries.
make -q -C "$B" libloom.la mca_coll_loom.la loom-bench gpu-tests >/dev/null 2>&1 ||
    { echo "bundle: $B is older than its sources (make -C $B && make -C $B gpu-tests first)" >&2; exit 1; }
rm -rf "$O"
mkdir -p "$O/.libs" "$O/test/gpu" "$O/test/perf"
strip --strip-debug -o "$O/.libs/mca_coll_loom.so" "$B/.libs/mca_coll_loom.so"
for f in "$B"/.libs/libloom.so*; do cp -P "$f" "$O/.libs/"; done
for f in "$O"/.libs/libloom.so.*.*; do [ -L "$f" ] || strip --strip-debug "$f"; done
for f in "$B"/test/gpu/*; do
    case $f in *.o|*.log|*.trs) continue;; esac
    [ -f "$f" ] && [ -x "$f" ] && strip --strip-debug -o "$O/test/gpu/${f##*/}" "$f"
done
[ -x "$B/loom-bench" ] && strip --strip-debug -o "$O/loom-bench" "$B/loom-bench"
for f in "$B"/test/perf/*; do
    case $f in *.o|*.log|*.trs) continue;; esac
    [ -f "$f" ] && [ -x "$f" ] && strip --strip-debug -o "$O/test/perf/${f##*/}" "$f"
done
du -sh "$O" | sed 's/^/bundle: /'

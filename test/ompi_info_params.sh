#!/usr/bin/env bash
# Every core tunable is an MCA parameter that ompi_info shows with its help
# text and environment name: the names come from docs/parameters.md's generated table
# (which test/unit/loom_unit holds equal to src/base/param_table.cc).
set -uo pipefail
B=${LOOM_BUILDDIR:?} S=${LOOM_SRCDIR:?}
command -v ompi_info >/dev/null || { echo "SKIP: no ompi_info"; exit 77; }
comp=$(mktemp -d)
trap 'rm -rf "$comp"' EXIT
cp "$B/.libs/mca_coll_loom.so" "$comp/"
# A sanitizer build's component leaves the sanitizer runtimes to the program
# (loom's test programs link them); ompi_info does not, so they are preloaded
# (and leaks of ompi_info itself are not loom's). Pipes end in grep -c, not
# grep -q: with pipefail, grep -q's early exit can kill the writer (SIGPIPE)
# and turn a match into a failure.
pre=
if nm -D "$comp/mca_coll_loom.so" 2>/dev/null | grep -c " U __asan" >/dev/null; then
    for lib in libasan.so libubsan.so; do
        f=$(${CC:-cc} -print-file-name=$lib 2>/dev/null)
        [ -e "$f" ] && pre="$pre $f"
    done
fi
out=$(LD_PRELOAD="$pre ${LD_PRELOAD:-}" ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" \
    OMPI_MCA_mca_base_component_path="$comp:$LOOM_OMPI_PKGLIBDIR" ompi_info --param coll loom --level 9 2>&1)
names=$(sed -n '/<!-- core parameters:/,/<!-- end of core parameters -->/s/^| `\(coll_loom_[a-z0-9_]*\)` | `\(LOOM_[A-Z0-9_]*\)`.*/\1:\2/p' "$S/docs/parameters.md")
[ -n "$names" ] || { echo "FAIL: no generated parameter table in docs/parameters.md"; exit 1; }
n=0
for pair in $names; do
    name=${pair%%:*} env=${pair#*:}
    echo "$out" | grep -c "parameter \"$name\"" >/dev/null || { echo "FAIL: ompi_info does not list $name"; exit 1; }
    echo "$out" | grep -A3 "parameter \"$name\"" | grep -c "environment: $env" >/dev/null ||
        { echo "FAIL: $name's help does not name $env"; exit 1; }
    n=$((n + 1))
done
echo "ok: ompi_info lists all $n core parameters with their environment names"

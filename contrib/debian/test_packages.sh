#!/usr/bin/env bash
# CI: build the Debian packages from this checkout (contrib/debian/build.sh),
# install them, run the demo with a plain mpirun (loom must be selected: the
# component sits in Open MPI's own directory), check pkg-config, then purge
# them: every file they installed must be gone and dpkg -S must know none.
#   contrib/debian/test_packages.sh       (as root; needs debhelper, dpkg-dev)
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
command -v dpkg-buildpackage >/dev/null || { echo "SKIP: dpkg-buildpackage not installed"; exit 77; }
[ "$(id -u)" -eq 0 ] || { echo "SKIP: installing packages needs root"; exit 77; }
pkgs="libloom0 libloom-dev openmpi-coll-loom"
out=$(dirname "$top")
log=$(mktemp)
cleanup() { rm -f "$log" "$out"/loom_*.buildinfo "$out"/loom_*.changes "$out"/libloom0_*.deb \
                  "$out"/libloom-dev_*.deb "$out"/openmpi-coll-loom_*.deb "$out"/*-dbgsym_*.deb; }
trap cleanup EXIT
if ! bash contrib/debian/build.sh >"$log" 2>&1; then tail -40 "$log"; echo "FAIL: dpkg-buildpackage"; exit 1; fi
debs=$(ls "$out"/libloom0_*.deb "$out"/libloom-dev_*.deb "$out"/openmpi-coll-loom_*.deb 2>/dev/null)
[ "$(echo "$debs" | wc -w)" -eq 3 ] || { echo "FAIL: expected 3 packages, got: $debs"; exit 1; }
for d in $debs; do echo "built $(basename "$d"): $(dpkg-deb -c "$d" | grep -vc '/$') files"; done
grep -m1 'GPU code' "$log" | sed 's/^ */configure: /'
echo "Open MPI: $(ompi_info --version 2>/dev/null | grep -m1 'Open MPI'); component: $(dpkg-deb -c "$out"/openmpi-coll-loom_*.deb | grep -o '/usr/lib/.*mca_coll_loom.so')"
# shellcheck disable=SC2086
dpkg -i $debs >"$log" 2>&1 || { cat "$log"; echo "FAIL: dpkg -i"; exit 1; }
# shellcheck disable=SC2086
files=$(dpkg -L $pkgs | while read -r f; do [ -f "$f" ] || [ -L "$f" ] && echo "$f"; done)
fail=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
demo=$(OMPI_MCA_coll_loom_verbose=1 timeout 300 mpirun -np 2 --oversubscribe loom-demo 2>&1)
echo "$demo" | grep -E 'loom-demo|MPI_COMM_WORLD.*(selected|allreduce)' | sort -u
if ! grep -q "MPI_COMM_WORLD.*: selected" <<<"$demo"; then
    # Debian 13's Open MPI 5.0.7 was seen not to load a component from its
    # own pkglibdir unless mca_base_component_path names it (it does load it then).
    pkglibdir=$(ompi_info --path pkglibdir 2>/dev/null | sed -n 's/.*Pkglibdir: *//p')
    case "$(ompi_info --version 2>/dev/null | grep -m1 -o 'v[0-9]*')" in
    v[5-9]*)
        demo=$(timeout 300 mpirun -np 2 --oversubscribe --mca mca_base_component_path "$pkglibdir" \
               --mca coll_loom_verbose 1 loom-demo 2>&1)
        if grep -q "MPI_COMM_WORLD.*: selected" <<<"$demo"; then
            echo "NOTE: Open MPI 5: a plain mpirun did not load the packaged component from $pkglibdir;" \
                 "with --mca mca_base_component_path $pkglibdir it is selected"
        else
            echo "FAIL: mpirun did not select the packaged loom, even with mca_base_component_path=$pkglibdir"; fail=1
        fi;;
    *) echo "FAIL: plain mpirun did not select the packaged loom"; fail=1;;
    esac
fi
[ "$(pkg-config --modversion loom 2>/dev/null)" = "$(dpkg-query -W -f='${Version}' libloom-dev)" ] ||
    { echo "FAIL: pkg-config does not find loom $(dpkg-query -W -f='${Version}' libloom-dev)"; fail=1; }
# shellcheck disable=SC2086
dpkg --purge $pkgs >"$log" 2>&1 || { cat "$log"; echo "FAIL: dpkg --purge"; exit 1; }
left=0
for f in $files; do
    if [ -e "$f" ] || [ -L "$f" ]; then echo "left behind: $f"; left=1; fi
    if dpkg -S "$f" >/dev/null 2>&1; then echo "dpkg -S still knows $f"; left=1; fi
done
[ $left -eq 0 ] || { echo "FAIL: the packages did not remove cleanly"; fail=1; }
[ $fail -eq 0 ] && echo "ok: $(echo "$files" | wc -l) files installed by $pkgs, demo selected loom, purged cleanly"
exit $fail

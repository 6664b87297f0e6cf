#!/usr/bin/env bash
# Open MPI 5.0's devel packages do not install every internal header a coll
# component needs (opal/mca/threads/pthreads/*.h): configure takes them from
# a source tree of the installed version (--with-ompi-src, or found). This
# puts Debian's/Ubuntu's source package of the installed openmpi under DEST:
#   contrib/ompi5/get_source.sh DEST      -> DEST/openmpi-VERSION
# apt needs deb-src entries; the machine's own are not changed: the deb
# entries are copied as deb-src into a private list, used by this script only.
set -euo pipefail
dest=${1:?usage: get_source.sh DEST}
ver=$(ompi_info --version 2>/dev/null | sed -n 's/.*Open MPI v\([0-9.]*\).*/\1/p' | head -n 1)
[ -n "$ver" ] || { echo "get_source: ompi_info not found: install Open MPI first (openmpi-bin libopenmpi-dev)" >&2; exit 1; }
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
if [ -f "$dest/openmpi-$ver/ompi/mca/coll/coll.h" ]; then echo "$dest/openmpi-$ver"; exit 0; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/parts" "$tmp/lists/partial" "$tmp/cache/archives/partial"
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] && sed -n 's/^deb \(.*\)/deb-src \1/p' "$f"
done >"$tmp/parts/src.list"
for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] && sed 's/^Types:.*/Types: deb-src/' "$f" >"$tmp/parts/${f##*/}"
done
# Everything apt writes goes under $tmp: no root needed (as root, apt's
# download sandbox user could not read $tmp).
apt_o=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$tmp/parts" -o Dir::State::Lists="$tmp/lists"
       -o Dir::Cache="$tmp/cache" -o Debug::NoLocking=1)
[ "$(id -u)" -ne 0 ] || apt_o+=(-o APT::Sandbox::User=root)
apt-get "${apt_o[@]}" update -qq >&2
# The source package of the binary package that ships ompi_info, at its installed version.
pkg=$(dpkg -S "$(command -v ompi_info)" 2>/dev/null | cut -d: -f1 | head -n 1)
vdeb=$(dpkg-query -W -f='${Version}' "${pkg:-openmpi-bin}" 2>/dev/null || true)
cd "$tmp"
apt-get "${apt_o[@]}" source -qq "openmpi${vdeb:+=$vdeb}" >&2 ||
    apt-get "${apt_o[@]}" source -qq openmpi >&2
src=$(ls -d "$tmp"/openmpi-*/ 2>/dev/null | head -n 1)
[ -n "$src" ] && [ -f "$src/ompi/mca/coll/coll.h" ] || { echo "get_source: apt-get source openmpi gave no source tree" >&2; exit 1; }
rm -rf "$dest/openmpi-$ver"
mv "$src" "$dest/openmpi-$ver"
echo "$dest/openmpi-$ver"

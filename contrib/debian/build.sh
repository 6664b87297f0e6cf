#!/usr/bin/env bash
# Builds the Debian packages (libloom0, libloom-dev, openmpi-coll-loom) from a
# checkout: links contrib/debian as debian/ for dpkg-buildpackage, builds with
# -b -us -uc, and leaves the .deb files in the checkout's parent folder.
#   contrib/debian/build.sh
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
[ -e debian ] || ln -s contrib/debian debian
trap 'rm -f "$top/debian"' EXIT
# A build folder left by another build (another Open MPI line, another
# root) must not lend its objects to this one.
rm -rf build-deb
dpkg-buildpackage -b -us -uc

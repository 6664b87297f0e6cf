#!/bin/sh
# Regenerate configure and Makefile.in (needs autoconf, automake, libtool).
set -e
cd "$(dirname "$0")"
autoreconf --install --force -I config >/dev/null
echo "autogen.sh: done; now run ./configure"

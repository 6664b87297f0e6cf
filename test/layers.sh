#!/usr/bin/env bash
# The layers of src (docs/architecture.md), as its #include lines show them:
#   base                  nothing of loom's but base/ and loom.h
#   btl_gpu, proxy, topo  never core/ or coll/
#   device                only device/ and base/ (and loom.h)
# A plain name ("x.h") must be loom.h, config.h or a file of the same folder.
# Prints every include that breaks a rule; fails if there is one.
set -uo pipefail
S=${LOOM_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
bad=0
rule() { # PART ALLOWED-TOP-FOLDERS...
    local part=$1 f inc top ok a
    shift
    while IFS= read -r f; do
        while IFS= read -r inc; do
            case $inc in
                */*) top=${inc%%/*};;
                loom.h|loom_component.h|config.h) continue;;
                *) [ -e "$(dirname "$f")/$inc" ] && continue
                   echo "src/${f#"$S"/src/}: \"$inc\" is neither loom.h nor a file of its folder"; bad=$((bad + 1)); continue;;
            esac
            ok=0
            for a in "$@"; do [ "$top" = "$a" ] && ok=1; done
            [ $ok = 1 ] || { echo "src/${f#"$S"/src/}: includes \"$inc\" ($part may not include $top/)"; bad=$((bad + 1)); }
        done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
    done < <(find "$S/src/$part" -type f \( -name '*.h' -o -name '*.c' -o -name '*.cc' -o -name '*.cu' \))
}
rule base base
rule btl_gpu btl_gpu base device proxy
rule proxy proxy base btl_gpu device
rule topo topo base
rule device device base
if [ $bad -gt 0 ]; then echo "FAIL: $bad includes break the layers"; exit 1; fi
echo "ok: base, btl_gpu, proxy, topo and device include nothing above them"

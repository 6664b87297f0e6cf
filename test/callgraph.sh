#!/usr/bin/env bash
# No call cycle across files in any part (src/coll, src/base, src/btl_gpu,
# src/proxy, src/topo, src/device, src/core, and all of them together), as contrib/dev/callgraph.py derives
# the file-level call graph; and the tool still sees one: a planted two-file
# cycle must fail it, while a member or another file's static of the same
# name must not make an edge.
set -uo pipefail
S=${LOOM_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not found (contrib/quickstart.sh installs it)"; exit 77; }
tool=$S/contrib/dev/callgraph.py
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
bad=0
printf 'int b_one(void);\nint a_one(void)\n{\n    return b_one();\n}\n' >"$t/a.c"
printf 'int a_one(void);\nint b_one(void)\n{\n    return a_one();\n}\n' >"$t/b.c"
if python3 "$tool" --cycles "$t" >/dev/null; then echo "FAIL: a planted cycle (a.c <-> b.c) was not found"; bad=1; fi
printf 'struct s { int a_one; };\nstatic int a_one(void)\n{\n    return 0;\n}\nint b_one(struct s *p)\n{\n    return p->a_one + a_one();\n}\n' >"$t/b.c"
if ! python3 "$tool" --cycles "$t" >/dev/null; then echo "FAIL: a member and a static of the same name made a cycle"; bad=1; fi
# A function in an anonymous namespace is its file's own too: a class's
# member of the same name, called in another file, is not a call to it.
rm -f "$t"/*.c
printf 'int b_one();\nnamespace {\nint launch()\n{\n    return 0;\n}\n} // namespace\nint a_one()\n{\n    return launch() + b_one();\n}\n' >"$t/a.cc"
printf 'struct K {\n    static int launch();\n};\nint b_one()\n{\n    return K::launch();\n}\n' >"$t/b.cc"
if ! python3 "$tool" --cycles "$t" >/dev/null; then echo "FAIL: a member named as another file's anonymous-namespace function made a cycle"; bad=1; fi
printf 'int a_one();\nnamespace loom {\nint b_one()\n{\n    return a_one();\n}\n} // namespace loom\n' >"$t/b.cc"
if python3 "$tool" --cycles "$t" >/dev/null; then echo "FAIL: a cycle through a named namespace was not found"; bad=1; fi
for part in coll base btl_gpu proxy topo device core "base btl_gpu proxy topo device coll core"; do
    dirs=()
    for d in $part; do dirs+=("$S/src/$d"); done
    out=$(python3 "$tool" --cycles "${dirs[@]}") || { echo "FAIL: src/$part:"; echo "$out" | grep '^cycle'; bad=1; }
done
[ $bad -eq 0 ] && echo "ok: no call cycle across files in src/coll, src/base, src/btl_gpu, src/proxy, src/topo, src/device, src/core, nor among them"
exit $bad

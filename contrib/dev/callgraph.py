#!/usr/bin/env python3
"""File-level call graph of C/C++ sources, and its cycles.

    contrib/dev/callgraph.py [--cycles] DIR...

Functions are found where they are defined (a name, or Class::name, and '('
at the start of a line, the body's '{' on a later line or at the end of it), calls wherever a
defined name appears inside braces (a call, or a pointer in a function table)
outside comments and strings; at brace depth 0 (namespace and extern "C"
blocks not counted) it is a declaration. A name
the calling file defines itself, or several files define (static helpers),
is not followed; nor is a member access (s.name, p->name), a declaration
of a member or variable of that name, or a name whose only definition is
another file's static function (or one in an anonymous namespace). Prints "caller-file -> callee-file: names" per
edge and each strongly connected group of more than one file (a call cycle
across files). With --cycles, exits 1 when such a group exists. A reading
aid, not a compiler: macros that build names are not followed.
"""
import os
import re
import sys

DEF = re.compile(r'^(?:[A-Za-z_][\w\s\*]*?[\s\*])?(?:\w+::)*([A-Za-z_]\w*)\s*\([^;{}]*\)\s*(?:const\s*)?\{?\s*$', re.M)
KEYWORDS = {'if', 'for', 'while', 'switch', 'return', 'sizeof', 'defined'}


def strip(text):
    text = re.sub(r'/\*.*?\*/', lambda m: '\n' * m.group(0).count('\n'), text, flags=re.S)
    text = re.sub(r'//[^\n]*', '', text)
    return re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)


def brace_depths(t):
    """Brace depth at each character, and whether it lies in an anonymous
    namespace; namespace and extern "C" blocks do not count (what is declared
    in them is at file scope)."""
    out, anon, d, stack = [0] * (len(t) + 1), [False] * (len(t) + 1), 0, []
    opener = re.compile(r'(?:\bnamespace(\s+[\w:]+)?|\bextern\s*"")\s*$')
    unnamed = 0  # anonymous namespaces open here
    for i, c in enumerate(t):
        out[i], anon[i] = d, unnamed > 0
        if c == '{':
            m = opener.search(t[max(0, i - 80):i])
            kind = 'anon' if m and m.group(0).lstrip().startswith('namespace') and not m.group(1) else (
                'scope' if m else 'block')
            stack.append(kind)
            if kind == 'anon':
                unnamed += 1
            elif kind == 'block':
                d += 1
        elif c == '}':
            kind = stack.pop() if stack else 'block'
            if kind == 'anon':
                unnamed -= 1
            elif kind == 'block':
                d = max(0, d - 1)
    return out, anon


def sources(dirs):
    for d in dirs:
        for root, _, files in os.walk(d):
            for f in sorted(files):
                if f.endswith(('.c', '.cc', '.cu', '.h', '.cuh')):
                    yield os.path.join(root, f)


def main(argv):
    check = '--cycles' in argv
    dirs = [a for a in argv if a != '--cycles']
    text = {p: strip(open(p, encoding='utf-8', errors='replace').read()) for p in sources(dirs)}
    scopes = {p: brace_depths(t) for p, t in text.items()}
    depth = {p: s[0] for p, s in scopes.items()}
    defined, static = {}, {}
    for p, t in text.items():
        for m in DEF.finditer(t):
            name = m.group(1)
            if name in KEYWORDS:
                continue
            # a definition: its body follows (not a prototype)
            rest = t[m.end():m.end() + 200].lstrip()
            if m.group(0).rstrip().endswith('{') or rest.startswith('{'):
                # a static function is its file's own: another file's use of
                # the name (a variable, another static) is not a call to it
                # (so is one in an anonymous namespace)
                if re.match(r'\s*static\b', m.group(0)) or scopes[p][1][m.start(1)]:
                    static.setdefault(name, set()).add(p)
                else:
                    defined.setdefault(name, set()).add(p)
    edges = {}
    names = re.compile(r'\b(' + '|'.join(sorted(map(re.escape, defined), key=len, reverse=True)) + r')\b') if defined else None
    for p, t in text.items():
        for m in names.finditer(t) if names else []:
            where = defined[m.group(1)]
            if p in where or len(where) > 1:
                continue  # its own (static) function, or a name several files define: not followed
            callee = next(iter(where))
            if depth[p][m.start()] == 0:
                continue  # a declaration or definition: calls sit inside braces
            if re.search(r'(?:->|\.|\bstd::)\s*$', t[max(0, m.start() - 6):m.start()]):
                continue  # a member (s.name, p->name) or the standard library's, not the function of that name
            if p in static.get(m.group(1), ()):
                continue  # the file's own static of that name
            before, after = t[max(0, m.start() - 2):m.start()], t[m.end():m.end() + 3]
            if re.search(r'[\w*&>]\s?$', before) and re.match(r'\s*(?:=(?!=)|;|\[|\{)', after):
                continue  # a declaration (a member or variable of that name), not a call
            edges.setdefault((p, callee), set()).add(m.group(1))
    for (a, b), ns in sorted(edges.items()):
        print(f'{a} -> {b}: {", ".join(sorted(ns))}')
    # strongly connected components (Tarjan)
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    index, low, stack, on, groups, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    sys.setrecursionlimit(10000)
    for v in sorted(text):
        if v not in index:
            visit(v)
    for g in groups:
        print(f'cycle of {len(g)} files: {" ".join(os.path.basename(x) for x in g)}')
    if not groups:
        print('no call cycle across files')
    return 1 if check and groups else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))

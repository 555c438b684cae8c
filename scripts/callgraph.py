#!/usr/bin/env python3
"""Check the shape of the C sources (make callgraph).

The sources are laid out as the pipeline: a folder per stage under src/
(statement, admission, load, parallel, index, input, heap, stats), and at
the top the module's entry and the services every stage uses (directpath.c,
report.c, fault.c).  A *unit* is a stage folder, or a top-level file.

Prints which source file calls which (through dp_* functions) and which unit
calls which, and fails when two files or two units call each other, directly
or around a circle (no stage reaches back up), when a file includes the
header of a unit it may not call (its own unit's, those it reaches by
calls, and directpath.h/compat.h are allowed), or when a function body is
longer than 60 lines without a comment line starting "Long:" somewhere in
the comment above it saying why, or a file is longer than 700 lines
without "Long:" in its top comment saying why.
"""
import glob
import os
import re
import sys

MAX_LINES = 60
MAX_FILE_LINES = 700


def strip_comments(text):
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


COMMON_HEADERS = {"directpath.h", "compat.h"}


def sources(src, ext="c"):
    return sorted(glob.glob(os.path.join(src, "**", f"*.{ext}"), recursive=True))


def unit_of(src, path):
    """A stage folder ('load/'), or a top-level file ('report.c')."""
    rel = os.path.relpath(path, src)
    return rel.split(os.sep)[0] + "/" if os.sep in rel else rel


def call_graph(src):
    defined, calls = {}, {}
    for path in sources(src):
        name = os.path.relpath(path, src)
        text = strip_comments(open(path).read())
        for fn in re.findall(r"^(dp_\w+)\(", text, flags=re.M):
            defined[fn] = name
        calls[name] = set(re.findall(r"\b(dp_\w+)\s*\(", text))
    return {f: sorted({defined[c] for c in cs if c in defined and defined[c] != f})
            for f, cs in calls.items()}


def cycles(graph):
    found = set()

    def visit(node, path):
        for nxt in graph.get(node, []):
            if nxt in path:
                cyc = path[path.index(nxt):]
                k = cyc.index(min(cyc))
                found.add(tuple(cyc[k:] + cyc[:k]))
            else:
                visit(nxt, path + [nxt])

    for node in graph:
        visit(node, [node])
    return sorted(found)


def unit_graph(src, graph):
    units = {}
    for f, callees in graph.items():
        u = unit_of(src, os.path.join(src, f))
        units.setdefault(u, set()).update(
            unit_of(src, os.path.join(src, c)) for c in callees)
    return {u: sorted(v - {u}) for u, v in units.items()}


def reachable(graph, start):
    seen, todo = set(), [start]
    while todo:
        for n in graph.get(todo.pop(), []):
            if n not in seen:
                seen.add(n)
                todo.append(n)
    return seen


def bad_includes(src, units):
    """Local headers a file includes that its unit may not reach."""
    out = []
    for path in sources(src) + sources(src, "h"):
        u = unit_of(src, path)
        allowed = reachable(units, u) | {u}
        for inc in re.findall(r'^#include "([^"]+)"', open(path).read(), flags=re.M):
            if os.path.basename(inc) in COMMON_HEADERS:
                continue
            target = os.path.normpath(os.path.join(src, inc))
            if not os.path.exists(target):
                target = os.path.normpath(os.path.join(os.path.dirname(path), inc))
            if not os.path.exists(target):
                continue
            hu = unit_of(src, target)
            if hu not in allowed:
                out.append(f"{os.path.relpath(path, src)} includes {inc} ({u} does not call {hu})")
    return out


def long_functions(src):
    out = []
    for path in sources(src):
        lines = open(path).read().split("\n")
        start = None
        for i, line in enumerate(lines):
            if line.startswith("{"):
                start = i
            elif line.startswith("}") and start is not None:
                if i - start > MAX_LINES:
                    j = start - 1
                    while j > 0 and not lines[j].startswith(" */") and not lines[j].strip() == "":
                        j -= 1
                    k = j
                    while k > 0 and not lines[k].startswith("/*"):
                        k -= 1
                    comment = "\n".join(lines[k:j + 1]) if lines[j].startswith(" */") else ""
                    if "Long:" not in comment:
                        name = lines[start - 1]
                        out.append(f"{os.path.relpath(path, src)}: {name.strip()} ({i - start} lines)")
                start = None
    return out


def long_files(src):
    """Files over MAX_FILE_LINES whose top comment gives no reason ("Long:")."""
    out = []
    for path in sources(src):
        text = open(path).read()
        n = text.count("\n")
        top = text[:text.find("*/") + 2]
        if n > MAX_FILE_LINES and "Long:" not in top:
            out.append(f"{os.path.relpath(path, src)} ({n} lines)")
    return out


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "src"
    graph = call_graph(src)
    for f in sorted(graph):
        print(f"{f:24} -> {' '.join(graph[f])}")
    units = unit_graph(src, graph)
    print()
    for u in sorted(units):
        print(f"{u:24} -> {' '.join(units[u])}")
    problems = [f"cycle: {' -> '.join(c + (c[0],))}" for c in cycles(graph)]
    problems += [f"stage cycle: {' -> '.join(c + (c[0],))}" for c in cycles(units)]
    problems += [f"include against the stage order: {x}" for x in bad_includes(src, units)]
    problems += [f"long function without a reason: {x}" for x in long_functions(src)]
    problems += [f"file over {MAX_FILE_LINES} lines without a reason at its top: {x}"
                 for x in long_files(src)]
    for p in problems:
        print(p)
    print("callgraph:", "ok" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

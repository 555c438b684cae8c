#!/usr/bin/env python3
"""Check the shape of the C sources (make callgraph).

The sources are laid out as the pipeline: a folder per stage under src/
(statement, admission, load, remote, parallel, index, input, heap, stats),
the ground floor src/common/ (settings, report, fault points, compat.h)
below every stage, and the module's entry src/directpath.c on top.  A
*unit* is a stage folder, or a top-level file.

Prints which source file calls which (through dp_* functions) and which unit
calls which, and fails when
  - two files or two units call each other, directly or around a circle
    (no stage reaches back up);
  - a file includes the header of a unit it may not call (its own unit's,
    those it reaches by calls, and the ground floor's are allowed);
  - a stage's public header (any header of a stage folder but its
    *_private.h) includes another stage's header: it includes its own
    stage's, the ground floor's and core's, and names another stage's type
    it takes by pointer as a declared struct; the files that use both
    include both;
  - a function body is longer than 80 lines, or a file (.c or .h) is not
    under 800 lines: there are no exemptions, and a "Long:" comment asking
    for one is itself an error;
  - docs/internals.md's source tree (the one map, between the markers
    "<!-- source tree -->" and "<!-- end source tree -->") does not name
    every .c file under src/ exactly once, or names one that is gone.
"""
import glob
import os
import re
import sys

MAX_LINES = 80
MAX_FILE_LINES = 800


def strip_comments(text):
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


# The ground floor: settings, report, fault points, compat.h.  Every
# stage may include its headers; it calls no stage.
GROUND = "common/"


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


def local_includes(src, path):
    """The headers under src/ a file includes: (as written, their unit)."""
    out = []
    for inc in re.findall(r'^#include "([^"]+)"', open(path).read(), flags=re.M):
        target = os.path.normpath(os.path.join(src, inc))
        if not os.path.exists(target):
            target = os.path.normpath(os.path.join(os.path.dirname(path), inc))
        if os.path.exists(target):
            out.append((inc, unit_of(src, target)))
    return out


def bad_includes(src, units):
    """Local headers a file includes that its unit may not reach."""
    out = []
    for path in sources(src) + sources(src, "h"):
        u = unit_of(src, path)
        allowed = reachable(units, u) | {u}
        for inc, hu in local_includes(src, path):
            if hu not in allowed and hu != GROUND:
                out.append(f"{os.path.relpath(path, src)} includes {inc} ({u} does not call {hu})")
    return out


def public_header_includes(src):
    """A stage's public headers (not *_private.h) that include another
    stage's header."""
    out = []
    for path in sources(src, "h"):
        u = unit_of(src, path)
        if u == GROUND or not u.endswith("/") or path.endswith("_private.h"):
            continue
        for inc, hu in local_includes(src, path):
            if hu not in (u, GROUND):
                out.append(f"{os.path.relpath(path, src)} includes {inc} ({hu}'s)")
    return out


def long_functions(src):
    """Function bodies over MAX_LINES lines (no exemptions)."""
    out = []
    for path in sources(src):
        lines = open(path).read().split("\n")
        start = None
        for i, line in enumerate(lines):
            if line.startswith("{"):
                start = i
            elif line.startswith("}") and start is not None:
                if i - start > MAX_LINES:
                    name = lines[start - 1]
                    out.append(f"{os.path.relpath(path, src)}: {name.strip()} ({i - start} lines)")
                start = None
    return out


def long_files(src):
    """Files not under MAX_FILE_LINES lines (no exemptions)."""
    out = []
    for path in sources(src) + sources(src, "h"):
        n = open(path).read().count("\n")
        if n >= MAX_FILE_LINES:
            out.append(f"{os.path.relpath(path, src)} ({n} lines)")
    return out


def exemptions(src):
    """Files that still ask for one ("Long:" anywhere in a comment)."""
    return [os.path.relpath(p, src) for p in sources(src) + sources(src, "h")
            if "Long:" in open(p).read()]


def map_problems(src):
    """docs/internals.md's file table against the .c files under src/."""
    doc = os.path.join(src, "..", "docs", "internals.md")
    text = open(doc).read()
    begin, end = "<!-- source tree -->", "<!-- end source tree -->"
    if begin not in text or end not in text:
        return [f"docs/internals.md has no {begin} ... {end} table"]
    table = text[text.index(begin):text.index(end)]
    named = re.findall(r"^\| `src/([^`]+)` \|", table, flags=re.M)
    out = []
    for path in sources(src):
        rel = os.path.relpath(path, src)
        n = named.count(rel)
        if n != 1:
            out.append(f"src/{rel} is named {n} times in docs/internals.md's source tree")
    for rel in sorted(set(named)):
        if not os.path.exists(os.path.join(src, rel)):
            out.append(f"docs/internals.md's source tree names src/{rel}, which does not exist")
    return out


def settings_problems(src):
    """docs/settings.md's table against the settings the code defines, in
    the same order."""
    defined = []
    for name in ("settings.c", "fault.c"):
        text = strip_comments(open(os.path.join(src, "common", name)).read())
        defined += re.findall(r'DefineCustom\w+Variable\("(directpath\.\w+)"', text)
    doc = open(os.path.join(src, "..", "docs", "settings.md")).read()
    documented = re.findall(r"^\| `(directpath\.\w+)` \|", doc, flags=re.M)
    if documented != defined:
        return [f"docs/settings.md's table {documented} is not the settings the code "
                f"defines, in their order: {defined}"]
    return []


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
    problems += [f"public header includes another stage's: {x}"
                 for x in public_header_includes(src)]
    problems += [f"function over {MAX_LINES} lines: {x}" for x in long_functions(src)]
    problems += [f"file not under {MAX_FILE_LINES} lines: {x}" for x in long_files(src)]
    problems += [f"a 'Long:' exemption (there are none): {x}" for x in exemptions(src)]
    problems += map_problems(src)
    problems += settings_problems(src)
    for p in problems:
        print(p)
    print("callgraph:", "ok" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

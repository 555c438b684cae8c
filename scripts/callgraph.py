#!/usr/bin/env python3
"""Check the shape of the C sources (make callgraph).

Prints which source file calls which (through dp_* functions), and fails
when two files call each other, directly or around a circle, or when a
function body is longer than 60 lines without a comment line starting
"Long:" somewhere in the comment above it saying why.
"""
import glob
import os
import re
import sys

MAX_LINES = 60


def strip_comments(text):
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


def call_graph(src):
    defined, calls = {}, {}
    for path in sorted(glob.glob(os.path.join(src, "*.c"))):
        name = os.path.basename(path)
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


def long_functions(src):
    out = []
    for path in sorted(glob.glob(os.path.join(src, "*.c"))):
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
                        out.append(f"{os.path.basename(path)}: {name.strip()} ({i - start} lines)")
                start = None
    return out


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "src"
    graph = call_graph(src)
    for f in sorted(graph):
        print(f"{f:16} -> {' '.join(graph[f])}")
    problems = [f"cycle: {' -> '.join(c + (c[0],))}" for c in cycles(graph)]
    problems += [f"long function without a reason: {x}" for x in long_functions(src)]
    for p in problems:
        print(p)
    print("callgraph:", "ok" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

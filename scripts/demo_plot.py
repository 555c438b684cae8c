"""Bar chart for scripts/demo.sh: time (load + CHECKPOINT) relative to the
plain load, per case and method.

    demo_plot.py SUMMARY PNG [--title TEXT]

SUMMARY is the file demo.sh writes, one line per case and method:
    case|method|seconds|ratio to plain|WAL MB|mark|how it ran
with mark 'ok', 'serial' (asked for a parallel load, ran serially) or
'fallback' (took the normal path).  Bars are grouped by case, plain first;
a 'serial' or 'fallback' bar is hatched and labelled so.
"""

import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

CASES = {
    "bare": "bare table (4 integers)\nINSERT ... SELECT",
    "orders": "orders CSV file\nCOPY into a table with PK, index, FK",
}
KINDS = {  # method kind: colour, legend
    "plain": ("#9e9e9e", "plain (no hint)"),
    "direct": ("#1f77b4", "/*+ APPEND */ (direct)"),
    "parallel": ("#2ca02c", "/*+ APPEND PARALLEL(n) */"),
}
MARKS = {"serial": "ran serially", "fallback": "fell back"}


def kind(method):
    if method.startswith("plain"):
        return "plain"
    return "parallel" if "PARALLEL" in method else "direct"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("summary")
    ap.add_argument("png")
    ap.add_argument("--title", default="directpath demo")
    args = ap.parse_args()

    groups = {}
    with open(args.summary) as f:
        for line in f:
            case, method, secs, ratio, wal, mark, _how = line.rstrip("\n").split("|", 6)
            groups.setdefault(case, []).append(
                (kind(method), float(secs), float(ratio), float(wal), mark))

    fig, ax = plt.subplots(figsize=(9, 5.4), dpi=110)
    width = 0.27
    kinds_seen = []
    for g, bars in enumerate(groups.values()):
        left = g - width * (len(bars) - 1) / 2
        for i, (k, secs, ratio, wal, mark) in enumerate(bars):
            x = left + i * width
            odd = mark in MARKS
            colour, _ = KINDS[k]
            ax.bar(x, ratio, width * 0.9, color=colour, edgecolor="white",
                   hatch="//" if odd else None)
            text = f"{ratio:.2f}\n{secs:.2f} s\n{wal:.0f} MB WAL"
            if odd:
                text = f"{MARKS[mark]}\n" + text
            ax.text(x, ratio + 0.015, text, ha="center", va="bottom", fontsize=8,
                    fontweight="bold" if odd else None)
            if k not in kinds_seen:
                kinds_seen.append(k)

    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([CASES.get(c, c) for c in groups], fontsize=9)
    ax.tick_params(axis="x", length=0)
    ax.set_xlim(-0.6, len(groups) - 0.4)
    top = max(b[2] for bars in groups.values() for b in bars)
    ax.set_ylim(0, max(top, 1.0) * 1.5)
    ax.set_ylabel("time (load + CHECKPOINT) relative to plain")
    ax.set_title(args.title, fontsize=10)
    ax.spines[["top", "right"]].set_visible(False)
    handles = [Patch(color=KINDS[k][0], label=KINDS[k][1]) for k in kinds_seen]
    marks = {b[4] for bars in groups.values() for b in bars}
    for mark, label in (("serial", "hatched: asked for PARALLEL, ran serially"),
                        ("fallback", "hatched: fell back to the normal path")):
        if mark in marks:
            handles.append(Patch(facecolor="white", edgecolor="#555555", hatch="//",
                                 label=label + " (why: the demo's output)"))
    ax.legend(handles=handles, loc="upper center", ncol=2, fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(args.png)


if __name__ == "__main__":
    main()

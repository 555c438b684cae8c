"""PNG plots (matplotlib, Agg): horizontal bars of medians with min–max
whiskers, one figure per scenario (scenario 1 and COPY: one per wal_level)."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from .util import MiB  # noqa: E402

COLORS = {"plain": "#7a7a7a", "direct": "#d95f02", "reference": "#1b9e77",
          "unlogged": "#1b9e77", "fdw": "#7570b3", "fdw_direct": "#a6761d",
          "insert-only": "#d95f02", "update": "#7a7a7a", "expr-index": "#7a7a7a",
          "no-expr-index": "#1b9e77"}


def color(path):
    return COLORS.get(path, "#7a7a7a")


def _bars(ax, labels, stats, colors, *, scale=1.0, stacked=None, stacked_label=None,
          xlabel="", log=False, title=None, fmt="{:.2f}"):
    """stats: list of stat dicts (or None); stacked: list of medians added on top."""
    y = list(range(len(labels)))
    meds = [(s["med"] / scale) if s else 0 for s in stats]
    ax.barh(y, meds, color=colors, height=0.7, zorder=2)
    lo = [max(0.0, m - s["min"] / scale) if s else 0 for m, s in zip(meds, stats)]
    hi = [max(0.0, s["max"] / scale - m) if s else 0 for m, s in zip(meds, stats)]
    if any(lo) or any(hi):
        ax.errorbar(meds, y, xerr=[lo, hi], fmt="none", ecolor="black", elinewidth=1,
                    capsize=3, zorder=4)
    ends = list(meds)
    if stacked:
        add = [(v or 0) / scale for v in stacked]
        ax.barh(y, add, left=meds, color=colors, alpha=0.35, height=0.7, zorder=2,
                hatch="//", edgecolor="white", linewidth=0)
        ends = [m + a for m, a in zip(meds, add)]
    top = max([e for e in ends] + [s["max"] / scale for s in stats if s] + [1e-9])
    for yi, (e, s) in enumerate(zip(ends, stats)):
        if s is None:
            ax.text(top * 0.01 if not log else 1, yi, "n/a", va="center", fontsize=7)
            continue
        # the value (median, stacked part included) right of the bar and its whisker
        x = max(e, s["max"] / scale)
        ax.text(x * (1.04 if log else 1.0) if log else x + top * 0.01, yi, fmt.format(e),
                va="center", fontsize=7, zorder=5)
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=8)
    if not ax.yaxis_inverted():  # shared y axes: invert once
        ax.invert_yaxis()
    ax.set_xlabel(xlabel, fontsize=9)
    if log:
        ax.set_xscale("log")
    else:
        ax.set_xlim(0, top * 1.22)
    ax.grid(axis="x", color="#dddddd", zorder=0)
    ax.tick_params(axis="x", labelsize=8)
    if title:
        ax.set_title(title, fontsize=10)


LEGEND = {"plain": "plain (normal path)", "direct": "direct path", "reference": "reference",
          "unlogged": "reference", "fdw": "postgres_fdw", "fdw_direct": "postgres_fdw, /*+ APPEND */",
          "insert-only": "insert-only model", "update": "UPDATE",
          "expr-index": "expression index (no HOT)", "no-expr-index": "no expression index"}


def _legend(fig, paths, extra=()):
    seen = {}
    for p in paths:
        seen.setdefault(LEGEND.get(p, p), color(p))
    handles = [Patch(color=c, label=lab) for lab, c in seen.items()]
    handles += list(extra)
    fig.legend(handles=handles, loc="lower center", ncol=min(6, len(handles)), fontsize=8,
               frameon=False)


def load_figure(path, title, cases):
    """cases: list of (label, path, agg) with agg.st(metric)."""
    if not cases:
        return None
    labels = [c[0] for c in cases]
    colors = [color(c[1]) for c in cases]
    h = max(3.0, 0.34 * len(cases) + 1.6)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, h), sharey=True)
    _bars(a1, labels, [c[2].st("load_s") for c in cases], colors,
          stacked=[c[2].med("ckpt_s") for c in cases], xlabel="seconds",
          title="load (solid, min–max whiskers) + CHECKPOINT after (hatched)")
    _bars(a2, labels, [c[2].st("wal_bytes") for c in cases], colors, scale=MiB,
          stacked=[c[2].med("vac_wal_bytes") for c in cases], xlabel="WAL MiB",
          title="load WAL (solid) + later VACUUM (FREEZE) WAL (hatched)", fmt="{:.0f}")
    fig.suptitle(title, fontsize=11)
    _legend(fig, [c[1] for c in cases])
    fig.tight_layout(rect=(0, 0.05 if h > 4 else 0.08, 1, 0.97))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def pgbench_init_figure(path, title, cases):
    if not cases:
        return None
    labels = [c[0] for c in cases]
    colors = [color(c[1]) for c in cases]
    h = max(3.0, 0.5 * len(cases) + 1.8)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, h), sharey=True)
    _bars(a1, labels, [c[2].st("total_s") for c in cases], colors, xlabel="seconds",
          title="pgbench -i 'done in' total")
    _bars(a2, labels, [c[2].st("wal_bytes") for c in cases], colors, scale=MiB,
          stacked=[c[2].med("vac_wal_bytes") for c in cases], xlabel="WAL MiB",
          title="WAL of pgbench -i (solid) + later VACUUM (FREEZE) (hatched)", fmt="{:.0f}")
    fig.suptitle(title, fontsize=11)
    _legend(fig, [c[1] for c in cases])
    fig.tight_layout(rect=(0, 0.08, 1, 0.95))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def fdw_figure(path, title, cases):
    if not cases:
        return None
    labels = [c[0] for c in cases]
    colors = [color(c[1]) for c in cases]
    h = max(3.0, 0.36 * len(cases) + 1.8)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, h), sharey=True)
    _bars(a1, labels, [c[2].st("rows_per_s") for c in cases], colors, log=True,
          xlabel="rows/s (log scale)", title="throughput", fmt="{:,.0f}")
    _bars(a2, labels, [c[2].st("wal_bytes") for c in cases], colors, scale=MiB,
          stacked=[c[2].med("remote_wal_bytes") for c in cases], xlabel="WAL MiB",
          title="local WAL (solid) + remote server WAL (hatched)", fmt="{:.1f}")
    fig.suptitle(title, fontsize=11)
    _legend(fig, [c[1] for c in cases])
    fig.tight_layout(rect=(0, 0.07, 1, 0.95))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def pgbench_run_figure(path, title, cases, panels):
    """panels: list of (metric, scale, xlabel, title, fmt)."""
    if not cases:
        return None
    labels = [c[0] for c in cases]
    colors = [color(c[1]) for c in cases]
    h = max(2.8, 0.5 * len(cases) + 1.6)
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels) + 2, h), sharey=True)
    for ax, (metric, scale, xlabel, ptitle, fmt) in zip(axes, panels):
        _bars(ax, labels, [c[2].st(metric) for c in cases], colors, scale=scale,
              xlabel=xlabel, title=ptitle, fmt=fmt)
    fig.suptitle(title, fontsize=11)
    _legend(fig, [c[1] for c in cases])
    fig.tight_layout(rect=(0, 0.09, 1, 0.94))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

"""Small helpers shared by the benchmark modules: errors, statistics,
number formatting, progress output."""

import math
import statistics
import sys
import time

from pgharness.proc import HarnessError

MiB = 1024 * 1024


class BenchError(HarnessError):
    """A scenario failed: the suite stops and exits non-zero."""


class FellBack(BenchError):
    """A statement that should have taken the direct path used the normal path."""


_T0 = time.monotonic()


def log(msg, *, err=False):
    """Progress line on stderr (stdout is kept for the final summary)."""
    el = time.monotonic() - _T0
    print(f"[{int(el) // 60:3d}:{int(el) % 60:02d}] {msg}", file=sys.stderr, flush=True)


def parse_count(text):
    """'10M', '200k', '2e6', '2_000_000' -> int."""
    t = str(text).strip().replace("_", "").replace(",", "")
    mult = 1
    if t and t[-1] in "kKmMgG":
        mult = {"k": 10**3, "m": 10**6, "g": 10**9}[t[-1].lower()]
        t = t[:-1]
    v = float(t) * mult
    if v <= 0 or v != int(v):
        raise ValueError(f"not a positive whole number: {text!r}")
    return int(v)


def nums(values):
    return [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)
            and not (isinstance(v, float) and math.isnan(v))]


def stat(values):
    """{'med', 'min', 'max', 'n'} of the numeric values, or None if there are none."""
    v = nums(values)
    if not v:
        return None
    return {"med": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)}


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def fmt_num(v, digits=2):
    if v is None:
        return "–"
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) >= 1000):
        return f"{int(v):,}"
    return f"{v:,.{digits}f}"


def fmt_stat(st, digits=2, scale=1.0, show_range=True):
    """'4.93 [4.88–4.97]' from a stat dict (values divided by scale)."""
    if not st:
        return "–"
    med = st["med"] / scale
    if not show_range or st["n"] < 2:
        return f"{med:,.{digits}f}"
    return f"{med:,.{digits}f} [{st['min'] / scale:,.{digits}f}–{st['max'] / scale:,.{digits}f}]"


def fmt_ratio(r, digits=2):
    return "–" if r is None else f"{r:.{digits}f}"


def fmt_mb(nbytes, digits=1):
    return "–" if nbytes is None else f"{nbytes / MiB:,.{digits}f}"


def md_table(header, rows):
    """A GitHub markdown table."""
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        out.append("| " + " | ".join("–" if c is None else str(c) for c in r) + " |")
    return "\n".join(out)


def text_table(header, rows):
    """A plain fixed-width table for the terminal."""
    cells = [list(map(str, header))] + [["–" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = []
    for n, r in enumerate(cells):
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths))))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)

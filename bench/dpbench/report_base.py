"""The report's building blocks: the records of a case aggregated over its
runs, and the cells and tables every scenario's section uses."""

from collections import OrderedDict

from .util import MiB, fmt_num, fmt_stat, ratio, stat, text_table


PHASES = ("replica", "minimal", "logical")


class CaseAgg:
    """All runs of one case in one phase."""

    def __init__(self, recs):
        self.recs = recs
        r0 = recs[0]
        self.case = r0["case"]
        self.label = r0["label"]
        self.path = r0["path"]
        self.twin = r0.get("twin")
        self.group = r0.get("group")
        self.available = not all(r.get("status") == "not available" for r in recs)
        self.why = next((r.get("why") for r in recs if r.get("why")), None)

    def st(self, metric):
        if not self.available:
            return None
        return stat([r.get(metric) for r in self.recs])

    def med(self, metric):
        s = self.st(metric)
        return s["med"] if s else None

    def first(self, metric):
        for r in self.recs:
            if r.get(metric) is not None:
                return r[metric]
        return None

    @property
    def n(self):
        return len(self.recs)


class Agg:
    def __init__(self, records):
        by = OrderedDict()
        for r in records:
            by.setdefault((r["scenario"], r["phase"], r["case"]), []).append(r)
        self.aggs = OrderedDict((k, CaseAgg(v)) for k, v in by.items())

    def get(self, sc, phase, case):
        return self.aggs.get((sc, phase, case))

    def cases(self, sc, phase, group=None):
        return [a for (s, p, _), a in self.aggs.items()
                if s == sc and p == phase and (group is None or a.group == group)]

    def phases(self, sc):
        return [p for p in PHASES if any(s == sc and ph == p for (s, ph, _) in self.aggs)]


def rel(a, b, metric):
    if a is None or b is None:
        return None
    if metric.endswith("wal_bytes") and (b.med(metric) or 0) < MiB:
        return None  # a ratio of two near-zero WAL volumes says nothing
    return ratio(a.med(metric), b.med(metric))


def mrows(rows_per_s):
    return "–" if rows_per_s is None else f"{rows_per_s / 1e6:.2f}"


def per_row(nbytes, rows):
    return "–" if nbytes is None or not rows else f"{nbytes / rows:.0f}"


def vm_text(a, vis="vm_all_visible", frz="vm_all_frozen", pages="heap_pages"):
    v, f, p = a.med(vis), a.med(frz), a.med(pages)
    if p is None:
        return "–"
    return f"{fmt_num(int(v or 0))} / {fmt_num(int(f or 0))} of {fmt_num(int(p))}"


def dp_text(a):
    d = a.first("directpath")
    if not d:
        return "–"
    if d["path"] != "direct":
        return f"normal: {d['reason']}"
    idx = f", {d['indexes_rebuilt']} index(es) rebuilt" if d.get("indexes_rebuilt") else ""
    return f"{fmt_num(d['pages_written'])} pages, {'frozen' if d['frozen'] else 'not frozen'}{idx}"




def run_ratios(a, base, metric):
    """median [min-max] of a's metric divided by base's of the same run."""
    if a is None or base is None:
        return None
    by = {r["run"]: r.get(metric) for r in base.recs}
    return stat([r[metric] / by[r["run"]] for r in a.recs
                 if r.get(metric) is not None and by.get(r["run"])])


def titled_table(title, header, rows):
    """A titled terminal table, or nothing without rows."""
    return ["", title, text_table(header, rows)] if rows else []


def load_rows(agg, scenario, *columns):
    """Per case of a replica-phase scenario: label, load time, ratio against
    its twin (1 for a case without one), then column(case) for each of
    'columns'."""
    rows = []
    for a in agg.cases(scenario, "replica"):
        base = agg.get(scenario, "replica", a.twin) if a.twin else None
        rows.append([a.label, fmt_stat(a.st("load_ckpt_s")),
                     fmt_stat(run_ratios(a, base, "load_ckpt_s")) if base else "1"] +
                    [column(a) for column in columns])
    return rows

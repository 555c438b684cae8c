"""What every scenario provides, and the run context handed to it."""

from dataclasses import dataclass, field


@dataclass
class Case:
    id: str                 # unique within a scenario and phase
    label: str              # what the report shows
    path: str               # plain | direct | reference | unlogged | ...
    twin: str = None        # id of the plain case measured beside it (ratios)
    params: dict = field(default_factory=dict)
    group: str = ""         # table section in the report


def twin_cases(items, group, param="kind", direct_label=", direct"):
    """Per (key, label) of 'items': the plain case '<key>_plain' and its
    direct twin '<key>_direct', params {param: key, "direct": bool}."""
    out = []
    for key, label in items:
        out.append(Case(f"{key}_plain", f"{label}, plain", "plain", group=group,
                        params={param: key, "direct": False}))
        out.append(Case(f"{key}_direct", f"{label}{direct_label}", "direct",
                        twin=f"{key}_plain", group=group, params={param: key, "direct": True}))
    return out


class Scenario:
    key = ""                # --only name
    number = 0
    seed = ""               # the seed experiment (docs/baseline.md)
    title = ""
    phases = ("replica",)
    alone = False           # on a fresh server of its own per phase, not round-robin
    default_rows = None     # rows when --rows is not given (default: the suite's)

    def settings(self, phase):
        """Server settings an `alone` scenario adds to the phase's."""
        return {}

    def warm_up(self, ctx):
        """An `alone` scenario's warm-up, after prepare (others share the suite's)."""

    def prepare(self, ctx, phase):
        """Once per phase, after the server started, before the first run."""

    def cases(self, ctx, phase):
        raise NotImplementedError

    def run(self, ctx, case, run_no):
        """Measure one case once; returns a dict (the raw record)."""
        raise NotImplementedError

    def finish(self, ctx, phase):
        """Once per phase, after the last run (also after a failure)."""


class Context:
    """Everything a scenario needs: options, the server, the work directory."""

    def __init__(self, args, server, workdir, bindir):
        self.args = args
        self.rows = args.rows
        self.quick = args.quick
        self.server = server
        self.workdir = workdir
        self.bindir = bindir
        self.settle_s = 0.2 if args.quick else 1.0
        self.phase = None
        self.notes = []           # (scenario key, text) shown in the report
        self.facts = {}           # per-scenario facts (e.g. direct COPY availability)

    def note(self, key, text):
        if (key, text) not in self.notes:
            self.notes.append((key, text))

    @property
    def pgbench_scale(self):
        return max(1, round(self.rows / 200000))

    @property
    def duration(self):
        if self.args.duration:
            return self.args.duration
        return 5 if self.quick else 30

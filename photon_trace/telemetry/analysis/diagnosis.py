"""What to fix first: idle per cause and site, and what removing it is worth.

A row's ``idle_ns`` is the idle in its bubbles (``attribution``): the rows add up to the
bubbles. What it is *charged* (``Diagnosis.charged_ns``; its share and its rank follow it) is what its
own removal gives back (``charging``): its bubbles where no other cause interacts with it; where
causes interact, the charges may overlap. What *removing* a row gives is another question, answered per
row alone: by the cost model a fix shortens the window by the idle it removes, and
the predicted speedup is ``window / (window - removable)``, the window being the time the
engine had work (its no work left out: ``no_work``).

**What a fix removes.** Take the row's host time out of the host's timeline (a sync's
wait, a phase's work, a stall): everything the host did after it moves earlier by as
much, so the next gap's host-late part shrinks by up to that (the *chain*: the row's
host time since the previous gap, ``GapSplit.chain``). What one gap does not absorb
moves the host ahead for the next gaps, until the host is ahead of the device anyway
(a step began with its first op queued early: the shift is then worth nothing). A gap
the shift leaves with host-late time shrinks by what it took; a gap cleared of it
would have had its op queued in time, so it shrinks to the device's launch latency
where the host is on time (``GapSplit.launch_ns``, measured in the same trace for a step's
first op and for the ops after it), not to 0; on a device that runs one op at a time, it
also keeps the device's own tail work at its start (``GapSplit.tail_ns``: the previous
step's copy-back on the host-process worker, ~30 us with the bookkeeping before it; its
own row, ``device_busy``): a shift that reaches into it clears the gap.
The range: **low** keeps a cleared gap's launch latency after the late enqueue as
measured; **high** closes a cleared gap but for the tail. Rows the device made
(``copy_wait``, ``device_busy``, ``dispatch``) are predicted as their own idle removed (for
``device_busy``: were the copies to run beside the compute, as on a GPU).

Not modelled, so outside the range: the device running at another speed once the fix
changes how it idles (a worker that sleeps through long bubbles comes back to cold
caches; on a shared CPU, a host that sleeps leaves the device more of it); and a device
that starts a late op faster than a queued one, measured where the trace has no queued
step start: the host-process worker takes a batch queued early from its ring after a
forward, with cold caches (~20 us to a step's first op after the copy-back), and a late
one warm (~8 us), so a sync in every step is predicted to give ~10-15 us a step more than
its removal does (README, "Attribution under injected faults").
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable
from typing import NamedTuple, Union

from photon_trace.telemetry.analysis.attribution import GapSplit
from photon_trace.telemetry.analysis.bubble_table import Bubbles
from photon_trace.telemetry.analysis.bubbles import Bubble, Gap, bubbles_of
from photon_trace.telemetry.analysis.causes import Cause, rank_of
from photon_trace.telemetry.analysis.charging import HostWork, charges
from photon_trace.telemetry.analysis.split_table import SplitTable


class Diagnosis(NamedTuple):
    cause: Cause
    site_or_phase: str
    idle_ns: int              # its bubbles' idle: the rows add up to the bubbles
    share: float              # its charge (``charged_ns``) over all bubble idle in the window
    predicted_speedup: float  # throughput ratio with this row removed (point estimate)
    speedup_low: float = 0.0  # the range (see the module docstring)
    speedup_high: float = 0.0
    charged: int | None = None   # what its own removal gives back (``charging``); None: its idle

    @property
    def charged_ns(self) -> int:
        """What the row is charged (``charging``): its bubbles, where no other cause interacts
        with it; the rows are ranked by it."""
        return self.idle_ns if self.charged is None else self.charged


class Removal(NamedTuple):
    """What removing some rows together is predicted to give."""
    removable_ns: int
    speedup: float
    low: float
    high: float


def _speedup(window_ns: int, removed: float) -> float:
    return window_ns / (window_ns - removed) if window_ns > removed else float("inf")


Splits = Union[Iterable[tuple[Gap, GapSplit]], SplitTable]
"""``bubbles.split_gaps``'s pairs, or the ``SplitTable`` ``analyze`` keeps of them."""


def _table(splits: Splits) -> SplitTable:
    return splits if isinstance(splits, SplitTable) else SplitTable.of(splits)


def predict_removal(splits: Splits, window_ns: int, rows: Iterable[tuple[Cause, str]],
                    launch_ns: int = 0) -> Removal:
    """What removing ``rows`` ((cause, detail) pairs) together is predicted to give (see the
    module docstring); ``splits`` from ``bubbles.split_gaps``, ``launch_ns`` its ``launch_ns``."""
    return predict_each(splits, window_ns, {0: set(rows)}, launch_ns)[0]


def predict_each(splits: Splits, window_ns: int, fixes: dict[Hashable, set[tuple[Cause, str]]],
                 launch_ns: int | None = 0) -> dict[Hashable, Removal]:
    """``predict_removal`` for several fixes (each a set of rows), each walked over the gaps in
    time order (``split_table.SplitTable.removed``)."""
    launch_ns = launch_ns or 0      # for a gap that measured none: nothing in the trace to measure it by
    removed = _table(splits).removed_each(fixes, launch_ns)
    return {k: Removal(int(p), _speedup(window_ns, p), _speedup(window_ns, lo), _speedup(window_ns, hi))
            for k, (p, lo, hi) in removed.items()}


def diagnose(splits: Splits, window_ns: int, launch_ns: int = 0,
             bubbles: list[Bubble] | None = None, work: HostWork | None = None) -> list[Diagnosis]:
    """One row per (cause, detail) of the gaps' bubbles (``bubbles``, when already made from
    ``splits``; a ``SplitTable`` needs them), most charged first (``charging``), each with what
    removing it alone would give."""
    if bubbles is None:
        if isinstance(splits, SplitTable):
            raise ValueError("diagnose: a SplitTable keeps no bubbles; pass them")
        splits = list(splits)
        bubbles = [b for gap, s in splits for b in bubbles_of(gap, s)]
    idle: dict[tuple[Cause, str], int] = defaultdict(int)
    if isinstance(bubbles, Bubbles):
        idle.update(bubbles.per_row())
    else:
        for b in bubbles:
            idle[(b.cause, b.detail)] += b.duration_ns
    total = sum(idle.values())
    table = _table(splits)
    charged = charges(idle, table.shared, work)     # ``work``: the critical path's floor (``charging.host_work``)
    removal = predict_each(table, window_ns, {key: {key} for key in charged}, launch_ns)
    rows = [Diagnosis(*key, idle.get(key, 0), ns / total if total else 0.0, removal[key].speedup,
                      removal[key].low, removal[key].high, ns) for key, ns in charged.items()]
    return sorted(rows, key=lambda d: (-d.charged_ns, d.cause, d.site_or_phase))


def ranked(diagnosis: list[Diagnosis]) -> list[Diagnosis]:
    """The order every report shows the rows in: what host code can fix, most idle first, then the
    host not running (blocked by another thread, then descheduled by the machine), then the
    device's own (launch latency, a wait on another stream), each most idle first: by
    ``Cause.who_fixes`` in ``causes.WHO_FIXES`` order. The command line, ``check``'s summary and
    the dashboard all rank with this."""
    return sorted(diagnosis, key=lambda d: rank_of(d.cause))   # stable: most idle first within each

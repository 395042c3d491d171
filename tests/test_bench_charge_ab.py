"""The charge-against-gain verdict of ``benchmarks/charge_ab.py`` (``bench_attribution.py``'s
third table, ``test_faults_charging.py``'s verdict), on made-up blocks whose answer is known."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from helpers.code_sites import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from charge_ab import OUTSIDE, UNDECIDED, WITHIN, _covered, decide  # noqa: E402

MS = 1e6


def blocks(charge_ms, period_gain_ms, busy_change_ms=0.0, noise_ms=0.0, runq_change_ms=0.0, n=12, steps=10,
           seed=1):
    """``n`` compared blocks of ``steps`` steps: a 30 ms period with the fault, its removal giving
    back ``period_gain_ms`` a step while the device runs ``busy_change_ms`` a step longer and the
    host waits ``runq_change_ms`` more in the run queue, the row charged ``charge_ms`` a step (each
    block's figures moved by up to ``noise_ms`` a step)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        e = rng.uniform(-noise_ms, noise_ms, 4) * steps * MS
        on = [30 * MS * steps, 10 * MS * steps, 2 * MS * steps, charge_ms * MS * steps + e[0]]
        off = [(30 - period_gain_ms) * MS * steps + e[1], (10 + busy_change_ms) * MS * steps + e[2],
               (2 + runq_change_ms) * MS * steps + e[3], 0.0]
        out.append(on + off + [steps])
    return np.array(out)


def test_a_charge_within_its_band_of_the_gain_is_within_and_one_beyond_it_outside():
    assert decide(blocks(10, 10, noise_ms=0.5), 0).verdict == WITHIN
    assert decide(blocks(20, 10, noise_ms=0.5), 0).verdict == OUTSIDE
    assert decide(blocks(2, 10, noise_ms=0.5), 0).verdict == OUTSIDE
    v = decide(blocks(10, 10), 0)
    assert v.charge[0] == pytest.approx(10) and v.period_gain[0] == pytest.approx(10) and v.blocks == 12


def test_data_that_straddle_an_edge_of_the_band_cannot_decide():
    v = decide(blocks(12.5, 10, noise_ms=6), 0)
    assert v.verdict == UNDECIDED and v.reason.startswith("the ratio's interval straddles"), v.why
    assert v.ratio[1] < 1.25 < v.ratio[2]
    # no gain measured at all: nothing to compare with
    assert decide(blocks(5, 0, noise_ms=3), 0).reason == "no gain measured"


def test_a_device_that_ran_at_another_speed_without_the_fault_leaves_the_data_undecided():
    # removing the fault gave back 6 ms of period while the device ran 8 ms a step longer (the
    # host's sleep had left it a core): the machine changed, whatever the charge
    v = decide(blocks(13, 6, busy_change_ms=8, noise_ms=0.3), 0)
    assert v.verdict == UNDECIDED and v.reason.startswith("the machine changed"), v.why
    assert v.idle_gain[0] == pytest.approx(14, abs=0.2) and v.busy_change[0] == pytest.approx(8, abs=0.2)
    # the host's wait for a core counts as the device's time does
    v = decide(blocks(13, 6, runq_change_ms=8, noise_ms=0.3), 0)
    assert v.reason.startswith("the machine changed") and v.runq_change[0] == pytest.approx(8, abs=0.2), v.why
    # a change the band absorbs (under a quarter of the gain) still decides, either way
    assert decide(blocks(10, 10, busy_change_ms=1, noise_ms=0.3), 0).verdict == WITHIN
    assert decide(blocks(20, 10, busy_change_ms=1, noise_ms=0.3), 0).verdict == OUTSIDE


def test_the_time_of_some_spans_before_each_instant():
    f = _covered([(0, 10), (20, 30)])
    assert list(f(np.array([-5, 0, 5, 10, 15, 25, 40]))) == [0, 0, 5, 10, 10, 15, 20]
    assert list(_covered([])(np.array([3, 4]))) == [0, 0]

"""``repr(schedule.simulate(n))`` is a short summary; ``.grid()`` draws the time grid."""

from __future__ import annotations

import jaxpp_mlir as pp


def test_repr_is_one_short_line():
    result = pp.Std1F1B(4).simulate(8)
    text = repr(result)
    assert "\n" not in text and len(text) < 200
    # 1F1B with forward 1, backward 2: makespan (m + p - 1) * 3 = 33, busy 8 * 3 of it per
    # rank (bubble 9/33); 8 forwards and 8 backwards launched on each of the 4 ranks.
    assert text == (
        "SimulationResult(4 ranks, makespan 33, bubble 27.3%, "
        "peak activations per rank [4, 3, 2, 1], 64 launches; .grid() draws it)"
    )


def test_numbers_in_the_summary_are_the_results():
    result = pp.GPipe(2).simulate(2)
    # 2 ranks, 2 microbatches, forward 1, backward 2: (m + p - 1) * 3.
    assert result.makespan == 9
    assert result.launches == 8
    assert result.peak_in_flight == [2, 2]


def test_grid_on_request():
    result = pp.Std1F1B(2).simulate(2, costs=pp.schedules.UNIT_COSTS)
    assert result.grid() == pp.Std1F1B(2).render(2)
    assert result.grid().splitlines()[1].startswith("rank 0 | F0.0")

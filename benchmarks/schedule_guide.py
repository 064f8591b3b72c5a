"""The numbers of README's "Choosing a schedule and a microbatch count", from the simulator.

Run: python benchmarks/schedule_guide.py [--ranks 4]

One model cut into ``ranks`` stages (GPipe, Std1F1B, ZeroBubble) or ``2 * ranks``
(Interleaved1F1B, DualPipeV: each task does half the work, so its costs are halved), on
``ranks`` ranks. For each microbatch count it prints the simulated bubble (the idle share
of the step), the peak number of microbatch activations a rank holds (memory) and the
executables launched per step (host cost), with the default costs (forward 1, backward
2, split backward 1 + 1). No JAX, no compilation.
"""

from __future__ import annotations

import argparse

import jaxpp_mlir as pp
from jaxpp_mlir.schedules import DEFAULT_COSTS


def schedules(ranks: int) -> list[tuple[pp.Schedule, float]]:
    """Each schedule and the share of the model one of its stages holds, relative to 1/ranks."""
    return [
        (pp.GPipe(ranks), 1.0),
        (pp.Std1F1B(ranks), 1.0),
        (pp.ZeroBubble(ranks), 1.0),
        (pp.Interleaved1F1B(2 * ranks, ranks), 0.5),
        (pp.DualPipeV(2 * ranks, ranks), 0.5),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4)
    ns = parser.parse_args()
    counts = (ns.ranks, 2 * ns.ranks, 4 * ns.ranks, 8 * ns.ranks)
    print("| schedule | " + " | ".join(f"m={m}: bubble, peak, launches" for m in counts) + " |")
    print("|---" * (len(counts) + 1) + "|")
    for schedule, scale in schedules(ns.ranks):
        costs = {kind: cost * scale for kind, cost in DEFAULT_COSTS.items()}
        cells = []
        for m in counts:
            try:
                result = schedule.simulate(m, costs=costs)
            except pp.ScheduleError:
                cells.append("too few microbatches")
                continue
            cells.append(
                f"{result.bubble_fraction:.0%}, {max(result.peak_in_flight)}, {result.launches}"
            )
        print(f"| `{schedule!r}` | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

"""Schedule simulator at planning scale (issue 29): seconds per ``simulate`` call.

Run: python benchmarks/simulate_scale.py [--repeat 3] [--microbatches 1024] [--no-reference]

Times ``Std1F1B(128).simulate(m)`` and ``Interleaved1F1B(256, 128).simulate(m)`` on a
fresh schedule each time (so building the task lists is counted, as a first call pays
it), the best and the median of ``--repeat`` runs, side by side with the simulator
before issue 29 (``tests/py/robustness/simulate_reference.py``, on the same task lists,
run once: it takes seconds) and checks that both give the same result. The load
average is printed with the numbers: the machine is shared.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from collections.abc import Callable

import jaxpp_mlir as pp

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(_ROOT, "tests", "py", "robustness"))
import simulate_reference  # noqa: E402

CASES: dict[str, Callable[[], pp.Schedule]] = {
    "Std1F1B(128)": lambda: pp.Std1F1B(128),
    "Interleaved1F1B(256, 128)": lambda: pp.Interleaved1F1B(256, 128),
}


def _same(new: object, old: object) -> bool:
    return all(
        getattr(new, field.name) == getattr(old, field.name)
        for field in dataclasses.fields(new)  # type: ignore[arg-type]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--microbatches", type=int, default=1024)
    parser.add_argument("--no-reference", action="store_true")
    args = parser.parse_args()
    m = args.microbatches
    for name, make in CASES.items():
        seconds = []
        for _ in range(args.repeat):
            schedule = make()
            begin = time.perf_counter()
            result = schedule.simulate(m)
            seconds.append(time.perf_counter() - begin)
        row = {
            "case": f"{name}.simulate({m})",
            "best_s": round(min(seconds), 3),
            "median_s": round(statistics.median(seconds), 3),
            "makespan": result.makespan,
            "load_avg": round(os.getloadavg()[0], 2),
        }
        if not args.no_reference:
            tasks = schedule.tasks(m)
            begin = time.perf_counter()
            old = simulate_reference.simulate_tasks(
                tasks,
                num_stages=schedule.num_stages,
                num_microbatches=m,
                stage_rank=schedule.stage_rank,
            )
            row["reference_s"] = round(time.perf_counter() - begin, 3)
            row["speedup_best"] = round(row["reference_s"] / row["best_s"], 1)
            row["same_result"] = _same(result, old)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()

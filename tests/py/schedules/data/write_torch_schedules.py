"""Writes the torch_*.csv files here with torch.distributed.pipelining's own exporter.

Run (torch 2.13.0 CPU installed):
    python tests/py/schedules/data/write_torch_schedules.py tests/py/schedules/data
Not a test: the tests read the files it wrote.
"""

import sys
from types import SimpleNamespace

from torch.distributed.pipelining import schedules as S

out = sys.argv[1]


def dump(order, name):
    S.PipelineScheduleMulti._dump_csv(SimpleNamespace(pipeline_order=order), f"{out}/{name}")


# 1F1B, 4 ranks/stages, 8 microbatches
dump(
    S.Schedule1F1B._get_pipeline_order(SimpleNamespace(_num_stages=4, _n_microbatches=8)),
    "torch_1f1b_4ranks_8mb.csv",
)
dump(
    S.ScheduleGPipe._get_pipeline_order(SimpleNamespace(_num_stages=4, _n_microbatches=8)),
    "torch_gpipe_4ranks_8mb.csv",
)
# Interleaved 1F1B: 4 ranks, 2 local stages each (8 stages), 8 microbatches
n, ranks, local = 8, 4, 2
rounds = max(1, n // ranks)
fake = SimpleNamespace(
    n_local_stages=local,
    pp_group_size=ranks,
    _n_microbatches=n,
    number_of_rounds=rounds,
    microbatches_per_round=n // rounds,
)
order = {
    r: S.ScheduleInterleaved1F1B._calculate_single_rank_operations(fake, r) for r in range(ranks)
}
dump(order, "torch_interleaved1f1b_4ranks_8stages_8mb.csv")

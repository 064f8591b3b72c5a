"""Cross-process transfers of a plan: where each process issues them, and a deadlock check.

When the ranks of a plan live in several processes, a send and its receive
(the instructions that put a value on a channel and take it off, whatever their
kind) whose ranks are in different processes is one point-to-point collective that
both processes execute. A process runs its collectives one at a time, in the
order it issues them (the PJRT CPU client launches collectives in issue order;
NCCL point-to-point calls block their stream likewise), and a collective
completes only when both processes have reached it. So the processes must
issue their common transfers in the same relative order, or they wait on each
other forever.

Issue points. The receiver issues transfer t at its ``Recv``; the sender at the
later of its ``Send`` and that ``Recv`` (it keeps the value alive until then).
For a plan in a single global order (every ``Send`` before its ``Recv``, which
is how ``jaxpp_mlir`` builds plans) both processes issue t at the ``Recv``'s
position, so every process issues a subsequence of one global sequence: no
deadlock by construction. A hand-written plan may list each process's work on
its own (a receive before the matching send in the list); ``check_deadlock``
simulates the blocking collectives and rejects an order that cannot complete,
before anything is compiled or run.

Consecutive receives from one rank to one rank form one group: they move in a
single executable (one collective launch for several values).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence

from .. import records
from ..errors import PlanError
from ..plan import ExecutionPlan, Instruction, TensorSpec


@records.frozen
class CrossTransfer:
    """One value moving between ranks that live in different processes."""

    channel: int
    value: int  # the value id on the sender
    recv_value: int  # the value id it defines on the receiver
    spec: TensorSpec
    src_rank: int
    dst_rank: int
    src_process: int
    dst_process: int
    send_at: int  # index of the Send in plan.instructions
    recv_at: int  # index of the Recv in plan.instructions

    def describe(self) -> str:
        return (
            f"value {self.value} ({self.spec}) from rank {self.src_rank} (process "
            f"{self.src_process}) to rank {self.dst_rank} (process {self.dst_process}), "
            f"channel {self.channel}"
        )


@records.frozen
class TransferGroup:
    """Transfers from one rank to one rank that move together as one collective."""

    index: int  # position of the group in plan order (by its first receive)
    transfers: tuple[CrossTransfer, ...]

    @property
    def src_rank(self) -> int:
        return self.transfers[0].src_rank

    @property
    def dst_rank(self) -> int:
        return self.transfers[0].dst_rank

    @property
    def src_process(self) -> int:
        return self.transfers[0].src_process

    @property
    def dst_process(self) -> int:
        return self.transfers[0].dst_process

    @property
    def src_issue_at(self) -> int:
        """Where the sender issues the group: the later of its sends and its receives."""
        return max(max(t.send_at, t.recv_at) for t in self.transfers)

    @property
    def dst_issue_at(self) -> int:
        """Where the receiver issues the group: its first receive."""
        return self.transfers[0].recv_at

    def issue_at(self, process: int) -> int:
        return self.src_issue_at if process == self.src_process else self.dst_issue_at

    def peer_of(self, process: int) -> int:
        return self.dst_process if process == self.src_process else self.src_process

    def describe(self) -> str:
        if len(self.transfers) == 1:
            return f"transfer of {self.transfers[0].describe()}"
        values = ", ".join(str(t.value) for t in self.transfers)
        return (
            f"transfer of values {values} from rank {self.src_rank} (process "
            f"{self.src_process}) to rank {self.dst_rank} (process {self.dst_process})"
        )


def cross_transfers(plan: ExecutionPlan, process_of: Sequence[int]) -> list[CrossTransfer]:
    """The plan's transfers between processes, paired send to receive by channel.

    The k-th send on a channel pairs with the k-th receive on it (in plan
    order). Pairs inside one process are left to the single-process executor.
    """
    sends: dict[int, deque[tuple[int, Instruction]]] = defaultdict(deque)
    recvs: dict[int, deque[tuple[int, Instruction]]] = defaultdict(deque)
    for at, inst in enumerate(plan.instructions):
        if inst.sends_on is not None:
            sends[inst.sends_on].append((at, inst))
        if inst.receives_on is not None:
            recvs[inst.receives_on].append((at, inst))
    result = []
    for channel in sorted(set(sends) | set(recvs)):
        s_queue, r_queue = sends[channel], recvs[channel]
        if len(s_queue) != len(r_queue):
            raise PlanError(
                f"channel {channel} carries {len(s_queue)} sends but {len(r_queue)} receives"
            )
        for (send_at, send), (recv_at, recv) in zip(s_queue, r_queue, strict=True):
            if send.rank != recv.peer or send.peer != recv.rank:
                raise PlanError(
                    f"channel {channel} carries a send from rank {send.rank} to rank "
                    f"{send.peer}, but instruction {recv_at} receives on rank {recv.rank} "
                    f"from rank {recv.peer}"
                )
            src, dst = process_of[send.rank], process_of[recv.rank]
            if src == dst:
                continue
            (value,), (recv_value,) = send.reads(), recv.writes()
            result.append(
                CrossTransfer(
                    channel=channel,
                    value=value,
                    recv_value=recv_value,
                    spec=plan.values[(recv.rank, recv_value)].spec,
                    src_rank=send.rank,
                    dst_rank=recv.rank,
                    src_process=src,
                    dst_process=dst,
                    send_at=send_at,
                    recv_at=recv_at,
                )
            )
    result.sort(key=lambda t: t.recv_at)
    return result


def group_transfers(transfers: Sequence[CrossTransfer]) -> list[TransferGroup]:
    """Groups receives that are adjacent in plan order, between the same two ranks,
    and whose sends all come before the group (so both sides issue it at once)."""
    groups: list[list[CrossTransfer]] = []
    for t in transfers:  # sorted by recv_at
        last = groups[-1] if groups else None
        if (
            last is not None
            and last[-1].recv_at + 1 == t.recv_at
            and (last[0].src_rank, last[0].dst_rank) == (t.src_rank, t.dst_rank)
            and all(x.send_at < last[0].recv_at for x in (*last, t))
        ):
            last.append(t)
        else:
            groups.append([t])
    return [TransferGroup(i, tuple(g)) for i, g in enumerate(groups)]


def issue_orders(groups: Sequence[TransferGroup], num_processes: int) -> list[list[TransferGroup]]:
    """Each process's transfer groups in the order it issues them."""
    orders: list[list[tuple[int, int, TransferGroup]]] = [[] for _ in range(num_processes)]
    for g in groups:
        # Ties (a process issuing two groups at one position) cannot happen: each
        # receive has its own position and a sender's late send its own.
        orders[g.src_process].append((g.src_issue_at, g.index, g))
        orders[g.dst_process].append((g.dst_issue_at, g.index, g))
    return [[g for _, _, g in sorted(order)] for order in orders]


def check_deadlock(groups: Sequence[TransferGroup], num_processes: int) -> None:
    """Raises ``PlanError`` if blocking transfers in issue order cannot all complete.

    Simulates every process issuing its transfers one at a time: a transfer
    completes when both of its processes have it next. Local work never
    blocks (the single-process checks cover it), so a stuck state is a
    deadlock, reported with what each stuck process waits on.
    """
    orders = issue_orders(groups, num_processes)
    position = [0] * num_processes
    done = 0
    progress = True
    while progress:
        progress = False
        for p in range(num_processes):
            if position[p] >= len(orders[p]):
                continue
            group = orders[p][position[p]]
            q = group.peer_of(p)
            if position[q] < len(orders[q]) and orders[q][position[q]] is group:
                position[p] += 1
                position[q] += 1
                done += 1
                progress = True
    stuck = [p for p in range(num_processes) if position[p] < len(orders[p])]
    if not stuck:
        return
    lines = [
        "the cross-process transfers of this plan would deadlock: each process issues its "
        "transfers one at a time, in its own order, and a transfer completes only when both "
        f"processes issue it ({done} of {len(groups)} transfers would complete):"
    ]
    for p in stuck:
        group = orders[p][position[p]]
        q = group.peer_of(p)
        peer_next = (
            orders[q][position[q]].describe() if position[q] < len(orders[q]) else "nothing more"
        )
        lines.append(
            f"  process {p} waits in the {group.describe()} (instruction "
            f"{group.issue_at(p)}), while process {q} first issues the {peer_next}"
        )
    lines.append(
        "Order the plan so that every pair of processes meets its common transfers in the "
        "same order (a plan in one global order, as built from a schedule, always does)."
    )
    raise PlanError("\n".join(lines))


def check_sender_holds_values(plan: ExecutionPlan, groups: Sequence[TransferGroup]) -> None:
    """Each sent value must be defined on its sender before the sender issues it."""
    for group in groups:
        for t in group.transfers:
            info = plan.values.get((t.src_rank, t.value))
            if info is None or info.defined_at > group.src_issue_at:
                raise PlanError(
                    f"the {group.describe()} is issued by process {t.src_process} at "
                    f"instruction {group.src_issue_at}, but rank {t.src_rank} does not hold "
                    f"value {t.value} before it"
                )

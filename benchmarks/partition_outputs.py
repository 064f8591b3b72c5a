"""Everything ``partition`` and ``jaxpp-opt`` produce for a corpus, written to a folder.

Run: python benchmarks/partition_outputs.py OUT_DIR [--cases W1,W2,...] [--no-opt]

A change meant to make partitioning faster must not change what it produces. Run this
before the change (say into /tmp/before) and after it (/tmp/after), then
``diff -r /tmp/before /tmp/after``: it must print nothing. The corpus:

- every ``jaxpp-opt`` RUN line of the lit suite (tests/lit), run in this process: its
  exit status, output and error text (``opt__<test>__<n>.txt``);
- ``partition`` of the reference workloads (W1, W2: ``benchmarks/reference.py``) under
  several schedules, options and stage splits, and of the captured lit inputs from
  text: the IR after every pass, every stage module and the schedule (``dump_dir``), and
  ``repr(program.plan)`` (``partition__<case>.plan.txt``), or the error's text.

The checkout's path is replaced by ``<checkout>`` everywhere (and the scratch files'
by ``<scratch>``), so that two checkouts and two output folders compare equal. Run the
same copy of this script on both sides: the W1/W2 steps it lowers carry its line
numbers in their locations. It needs 8 CPU devices (it sets ``XLA_FLAGS`` when unset).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import os
import pathlib
import shlex
import sys
import warnings
from collections.abc import Callable
from importlib.metadata import version

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import numpy as np  # noqa: E402

import jaxpp_mlir as pp  # noqa: E402
from jaxpp_mlir.tools import opt  # noqa: E402

CHECKOUT = pathlib.Path(__file__).resolve().parents[1]
LIT = CHECKOUT / "tests" / "lit"
sys.path.insert(0, str(CHECKOUT / "benchmarks"))
import reference  # noqa: E402


def _inputs_dir() -> pathlib.Path:
    """The captured lowerings for the installed jax (as tests/lit/lit.cfg.py picks them)."""
    inputs = LIT / "inputs"
    minor = ".".join(version("jax").split(".")[:2])
    return inputs / f"jax-{minor}" if (inputs / f"jax-{minor}").is_dir() else inputs


def _run_lines(path: pathlib.Path) -> list[str]:
    """The RUN lines of a lit test, continuation lines joined."""
    lines, current = [], ""
    for line in path.read_text().splitlines():
        if "RUN:" not in line:
            continue
        text = line.split("RUN:", 1)[1].strip()
        if text.endswith("\\"):
            current += text[:-1] + " "
            continue
        lines.append(current + text)
        current = ""
    return lines


def _opt_arguments(run_line: str, test: pathlib.Path, scratch: str) -> list[str] | None:
    """The arguments of a RUN line's ``jaxpp-opt`` (None if the line runs something else)."""
    command = run_line.split("|")[0].replace("2>&1", "")
    for name, value in (
        ("%s", str(test)),
        ("%S", str(test.parent)),
        ("%inputs", str(_inputs_dir())),
        ("%t", scratch),
    ):
        command = command.replace(name, value)
    words = shlex.split(command)
    if words and words[0] == "not":
        words = words[1:]
    return words[1:] if words and words[0] == "jaxpp-opt" else None


def write_opt_outputs(out: pathlib.Path, scratch: str, folder: str = "") -> int:
    """Runs every ``jaxpp-opt`` RUN line of the lit suite (of ``tests/lit/<folder>`` only,
    if given); returns how many."""
    count = 0
    for test in sorted((LIT / folder).rglob("*.mlir")):
        if {"inputs", "Output"} & set(test.relative_to(LIT).parts):
            continue
        for index, run_line in enumerate(_run_lines(test)):
            arguments = _opt_arguments(run_line, test, scratch)
            if arguments is None:
                continue
            stdout, stderr = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                status = opt.main(arguments)
            name = "__".join(test.relative_to(LIT).parts)
            text = f"status {status}\n{stdout.getvalue()}\n--- stderr ---\n{stderr.getvalue()}"
            _write(out / f"opt__{name}__{index}.txt", text.replace(scratch, "<scratch>"))
            count += 1
    return count


def _mesh(num_ranks: int) -> pp.MpmdMesh:
    devices = np.array(jax.devices()[:num_ranks])
    return pp.MpmdMesh(jax.sharding.Mesh(devices, ("stage",)), "stage")


def _lowered(name: str):
    spec = reference.WORKLOADS[name]
    params, xs, ys = reference.init(spec)
    return jax.jit(reference.pipelined_step_fn(spec)).lower(params, xs, ys)


Case = Callable[[pathlib.Path], pp.PartitionedProgram]  # partitions with that dump_dir


def partition_cases() -> dict[str, Case]:
    """Each case partitions one input one way (lowered on first use, then reused)."""
    lowered: dict[str, object] = {}

    def step(name: str):
        if name not in lowered:
            lowered[name] = _lowered(name)
        return lowered[name]

    packed = dataclasses.replace(
        pp.PartitionOptions.from_env(), pack_accumulators=True, pack_parameters=True
    )
    std = pp.Std1F1B
    cases: dict[str, Case] = {
        "W1": lambda d: pp.partition(step("W1"), mesh=_mesh(4), schedule=std(4), dump_dir=d),
        "W1_zero_bubble": lambda d: pp.partition(
            step("W1"), mesh=_mesh(4), schedule=pp.ZeroBubble(4), dump_dir=d
        ),
        "W1_packed": lambda d: pp.partition(
            step("W1"), mesh=_mesh(4), schedule=std(4), options=packed, dump_dir=d
        ),
        "W2": lambda d: pp.partition(step("W2"), mesh=_mesh(8), schedule=std(8), dump_dir=d),
        "W2_gpipe": lambda d: pp.partition(
            step("W2"), mesh=_mesh(8), schedule=pp.GPipe(8), dump_dir=d
        ),
        "W2_interleaved": lambda d: pp.partition(
            step("W2"), mesh=_mesh(4), schedule=pp.Interleaved1F1B(8, mpmd_dim=4), dump_dir=d
        ),
        "W2_fused": lambda d: pp.partition(
            step("W2"), mesh=_mesh(8), schedule=std(8), fuse_tasks=True, dump_dir=d
        ),
        "W2_merged": lambda d: pp.partition(step("W2"), mesh=_mesh(4), schedule=std(4), dump_dir=d),
        "W2_forced_split": lambda d: pp.partition(
            step("W2"), mesh=_mesh(4), schedule=std(4), stage_split=(1, 3, 2, 2), dump_dir=d
        ),
    }
    for path in sorted(_inputs_dir().glob("*.mlir")):
        if path.stem.startswith("sharded_"):
            continue  # lowered on a 3-axis mesh; jaxpp-opt's lit RUN lines cover them
        cases[f"text_{path.stem}"] = lambda d, path=path: pp.partition(
            path.read_text(), mesh=_mesh(3), dump_dir=d
        )
    return cases


def write_partition_outputs(out: pathlib.Path, names: list[str] | None) -> int:
    """Partitions each case with a dump; returns how many cases ran."""
    cases = partition_cases()
    unknown = sorted(set(names or ()) - set(cases))
    if unknown:
        raise SystemExit(f"unknown cases {unknown}; known: {', '.join(cases)}")
    for name in names or list(cases):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", pp.PartitionWarning)
                program = cases[name](out / f"partition__{name}")
            _write(out / f"partition__{name}.plan.txt", repr(program.plan))
        except Exception as error:  # the error's text is an output too
            _write(out / f"partition__{name}.error.txt", f"{type(error).__name__}: {error}")
    return len(names or cases)


def _write(path: pathlib.Path, text: str) -> None:
    path.write_text(text.replace(str(CHECKOUT), "<checkout>"))


def _normalize_dumps(out: pathlib.Path) -> None:
    for path in out.rglob("*"):
        if path.is_file() and not path.name.startswith("opt__"):
            path.write_text(path.read_text().replace(str(CHECKOUT), "<checkout>"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=pathlib.Path, help="folder to write (created)")
    parser.add_argument("--cases", default="", help="partition cases to run (default: all)")
    parser.add_argument("--no-opt", action="store_true", help="skip the jaxpp-opt RUN lines")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.no_opt:
        scratch = str(args.out / "scratch")
        print(f"jaxpp-opt runs: {write_opt_outputs(args.out, scratch)}")
        for leftover in args.out.glob("scratch*"):
            leftover.unlink()
    names = [n for n in args.cases.split(",") if n] or None
    print(f"partition cases: {write_partition_outputs(args.out, names)}")
    _normalize_dumps(args.out)


if __name__ == "__main__":
    main()

"""``python -m jaxpp_mlir.trace merge OUT IN...``: one trace from per-process traces.

Each process of a multi-process run writes its own ``program_trace`` file
(``step.process<N>.json``, its events under ``pid`` N); the merged file shows every
process's ranks in one timeline. Each input must hold other processes than the
others (traces of separate runs, each of process 0, are refused: their spans would
lie over each other); a bad input is named.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from jaxpp_mlir.runtime.observation.trace_files import merge_traces, write_trace


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m jaxpp_mlir.trace", description="Tools for jaxpp_mlir traces."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    merge = commands.add_parser("merge", help="merge per-process traces into one file")
    merge.add_argument("output", help="the merged trace to write")
    merge.add_argument("inputs", nargs="+", help="per-process trace files")
    args = parser.parse_args(argv)
    try:
        write_trace(args.output, merge_traces(args.inputs))
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

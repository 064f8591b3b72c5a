"""NVIDIA JaxPP's own public tests, run unchanged against jaxpp_mlir.

Run: python benchmarks/jaxpp_public_tests.py --jaxpp PATH [--public-only] [--json FILE]
     [FILE ...]

PATH is a JaxPP checkout, or a bare git directory of one (``fetch github:NVIDIA/jaxpp``
leaves one at /work/.mirror/NVIDIA+jaxpp/repo; its HEAD's ``tests/`` is extracted to a
temporary folder). Nothing of JaxPP is copied into this repository: its test files are
read from PATH and run as they are. Needs ``parameterized`` (JaxPP's tests import it).

Each test file runs in its own process (as JaxPP's scripts/run_tests.sh runs
test_mpmd_array.py apart: it sets its own device count), on 8 CPU devices, under
pytest, with ``import jaxpp`` resolved to jaxpp_mlir by ``jaxpp_test_aliases``. By
default the JaxPP internals that tests/test_transformations.py calls get adapters onto
jaxpp_mlir's entry points (see that module); ``--public-only`` runs with JaxPP's public
modules alone. Files that need CUDA, NCCL or several processes are listed, not run.
Prints passed / failed / errors / skipped per file and a line for each test that did not
pass. Recorded: RESULTS.md ("JaxPP's public tests").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: JaxPP's test files that cannot run on CPU devices in one process, and why.
NEEDS_GPU = {
    "tests/test_dlpack.py": "loads libcudart.so and copies from CUDA memory",
    "tests/test_mpmd_mesh.py": "builds a CUDA topology (jax.experimental.topologies, 'cuda')",
    "tests/test_dime2.py": "NCCL send/recv between processes (JaxDistributedTest)",
    "tests/test_reshard_utils.py": "several processes (JaxDistributedTest, scripts/local_mc.sh)",
    "tests/functional_testing/test_dropout_enabled.py": "skips itself without CUDA devices",
    "tests/functional_testing/test_passthrough_vars.py": "skips itself without CUDA devices",
}


def _tests_folder(jaxpp: Path, scratch: Path) -> Path:
    """The folder holding JaxPP's ``tests/``: the checkout, or HEAD extracted from a git dir."""
    if (jaxpp / "tests").is_dir():
        return jaxpp
    if (jaxpp / "HEAD").is_file() and (jaxpp / "objects").is_dir():
        archive = subprocess.run(
            ["git", f"--git-dir={jaxpp}", "archive", "HEAD", "tests"],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(scratch)], input=archive, check=True)
        return scratch
    raise SystemExit(f"{jaxpp}: neither a JaxPP checkout (no tests/) nor a git directory")


def _test_files(root: Path, chosen: list[str]) -> list[str]:
    if chosen:
        return chosen
    return sorted(str(p.relative_to(root)) for p in (root / "tests").rglob("test_*.py"))


def _run_file(root: Path, rel: str, public_only: bool, scratch: Path) -> dict:
    report = scratch / (rel.replace("/", "__") + ".json")
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    command = [sys.executable, __file__, "--child", rel, "--report", str(report)]
    if public_only:
        command.append("--public-only")
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
    if not report.exists():
        tail = (done.stdout + done.stderr)[-2000:]
        return {"file": rel, "crashed": True, "tests": {}, "output": tail}
    return json.loads(report.read_text())


def _child(rel: str, report: Path, public_only: bool) -> int:
    """In the test file's process: alias jaxpp, run pytest, write each test's outcome."""
    import pytest

    sys.path.insert(0, str(HERE))
    import jaxpp_test_aliases

    jaxpp_test_aliases.install(internals=not public_only)
    outcomes: dict[str, dict] = {}

    class Recorder:
        def pytest_collectreport(self, report):
            if report.failed:
                outcomes[report.nodeid or rel] = {"outcome": "error", "why": _why(report)}

        def pytest_runtest_logreport(self, report):
            if report.when == "call" or report.failed or report.skipped:
                outcome = (
                    report.outcome
                    if report.when == "call"
                    else ("skipped" if report.skipped else "error")
                )
                if report.when == "teardown" or report.nodeid not in outcomes:
                    outcomes[report.nodeid] = {"outcome": outcome, "why": _why(report)}

    ini = report.with_suffix(".ini")
    ini.write_text("[pytest]\n")
    args = [rel, "-q", "-p", "no:cacheprovider", "-c", str(ini), "--rootdir", os.getcwd()]
    code = pytest.main(args, plugins=[Recorder()])
    report.write_text(json.dumps({"file": rel, "tests": outcomes, "exit": int(code)}))
    return 0


def _why(report) -> str:
    if report.passed:
        return ""
    if report.skipped and isinstance(report.longrepr, tuple):
        return report.longrepr[2]
    text = str(report.longrepr)
    errors = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
    return " / ".join(line for line in errors[:3] if line)[:300] or text.splitlines()[-1]


def _summary(results: list[dict]) -> dict:
    kinds = ("passed", "failed", "error", "skipped")
    totals = dict.fromkeys(kinds, 0)
    print(f"{'file':48} " + " ".join(f"{k:>7}" for k in kinds))
    for result in results:
        counts = dict.fromkeys(kinds, 0)
        for test in result["tests"].values():
            counts[test["outcome"]] += 1
        for k in kinds:
            totals[k] += counts[k]
        note = "  (crashed)" if result.get("crashed") else ""
        print(f"{result['file']:48} " + " ".join(f"{counts[k]:7}" for k in kinds) + note)
    print(f"{'total':48} " + " ".join(f"{totals[k]:7}" for k in kinds))
    for result in results:
        if result.get("crashed"):
            print(f"\n{result['file']} crashed:\n{result['output']}")
        for nodeid, test in result["tests"].items():
            if test["outcome"] != "passed":
                print(f"{test['outcome']:8} {nodeid}: {test['why']}")
    return totals


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", help="test files relative to the checkout")
    parser.add_argument("--jaxpp", type=Path, help="a JaxPP checkout or its git directory")
    parser.add_argument("--public-only", action="store_true", help="no adapters for internals")
    parser.add_argument("--json", type=Path, help="write every test's outcome here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--report", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return _child(args.child, args.report, args.public_only)
    if args.jaxpp is None:
        parser.error("--jaxpp PATH is required")
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        root = _tests_folder(args.jaxpp.resolve(), scratch)
        results = []
        for rel in _test_files(root, args.files):
            if rel in NEEDS_GPU and not args.files:
                print(f"not run: {rel}: {NEEDS_GPU[rel]}")
                continue
            results.append(_run_file(root, rel, args.public_only, scratch))
        print()
        _summary(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

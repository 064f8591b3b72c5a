"""The same input partitions to byte-identical IR, dumps and plan (also across processes)."""

import hashlib
import os
import pathlib
import subprocess
import sys
import textwrap
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpp_mlir as pp

SCRIPT = textwrap.dedent(
    """
    import os, pathlib, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    sys.path.insert(0, {tests_dir!r})
    import test_determinism as t
    out = pathlib.Path(sys.argv[1])
    print(t.hash_probe())
    print(t.digests(t.partition_in_a_thread(out)), end="")
    """
)


def hash_probe() -> int:
    """A str hash: it differs between two processes whose hash seeds differ."""
    return hash("jaxpp_mlir determinism")


def digests(texts: dict[str, str]) -> str:
    return "".join(
        f"{name} {hashlib.sha256(text.encode()).hexdigest()}\n"
        for name, text in sorted(texts.items())
    )


def _model(params, x):
    for i, w in enumerate(params):
        marked = pp.pipeline_enter_stage({"h": jnp.tanh(x @ w), "skip": x * float(i + 1)})
        x = marked["h"] + 0.5 * marked["skip"]
    return x


def _step(params, batch):
    def loss(p, microbatch):
        x, y = microbatch
        return jnp.mean((_model(p, x) - y) ** 2)

    losses, grads = pp.treduce(
        lambda mb: jax.value_and_grad(loss)(params, mb), batch, operation=(pp.Concat(), pp.Add)
    )
    return [w - 0.1 * g for w, g in zip(params, grads, strict=True)], losses


def partition_outputs(dump_dir: pathlib.Path) -> dict[str, str]:
    """Every text a partition produces: the program's IR, stage modules, plan and dumps."""
    # numpy inputs: lowering needs only their shapes (no eager jax program to compile)
    params = [np.full((4, 4), 0.1 * (i + 1), np.float32) for i in range(4)]
    batch = (np.ones((4, 2, 4), np.float32), np.zeros((4, 2, 4), np.float32))
    mesh = pp.MpmdMesh(jax.sharding.Mesh(np.array(jax.devices()[:2]), ("stage",)), "stage")
    lowered = jax.jit(_step).lower(params, batch)
    program = pp.partition(
        lowered, mesh=mesh, schedule=pp.Interleaved1F1B(4, mpmd_dim=2), dump_dir=dump_dir
    )
    texts = {"ir": program.ir(), "schedule": program.schedule_text(), "repr": repr(program)}
    texts.update({f"stage:{name}": text for name, text in program.stage_modules.items()})
    for path in sorted(dump_dir.rglob("*")):
        if path.is_file():
            texts[f"dump:{path.relative_to(dump_dir)}"] = path.read_text()
    return texts


def partition_in_a_thread(dump_dir: pathlib.Path) -> dict[str, str]:
    """``partition_outputs`` called from a thread of its own: the call stack, which the
    lowering's locations record, is then the same in pytest and in a plain script."""
    texts: list[dict[str, str]] = []
    thread = threading.Thread(target=lambda: texts.append(partition_outputs(dump_dir)))
    thread.start()
    thread.join(timeout=300)
    assert texts, "the partition in a thread raised or did not end"
    return texts[0]


@pytest.fixture(scope="module")
def first(tmp_path_factory) -> dict[str, str]:
    """The texts of one partition in this process."""
    return partition_in_a_thread(tmp_path_factory.mktemp("first"))


def test_partitioning_twice_gives_identical_texts(first, tmp_path):
    second = partition_in_a_thread(tmp_path / "second")
    assert sorted(first) == sorted(second)
    assert len([name for name in first if name.startswith("dump:")]) > 5
    for name in first:
        assert first[name] == second[name], f"{name} differs between two partitions"


def test_partitioning_in_a_process_with_another_hash_seed_gives_identical_texts(first, tmp_path):
    script = SCRIPT.format(tests_dir=str(pathlib.Path(__file__).parent))
    seed = "4242" if os.environ.get("PYTHONHASHSEED") == "1" else "1"
    result = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "other")],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, PYTHONHASHSEED=seed),
        cwd=os.getcwd(),  # marker locations are recorded relative to the working directory
    )
    assert result.returncode == 0, result.stderr[-4000:]
    probe, other = result.stdout.split("\n", 1)
    assert int(probe) != hash_probe(), "the two processes hash strings alike"
    assert other.count("\n") > 8
    assert other == digests(first)

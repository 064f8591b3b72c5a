"""The same input partitions to byte-identical IR, dumps and plan (also across processes)."""

import os
import pathlib
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np

import jaxpp_mlir as pp

SCRIPT = textwrap.dedent(
    """
    import hashlib, os, pathlib, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    sys.path.insert(0, {tests_dir!r})
    import test_determinism as t
    out = pathlib.Path(sys.argv[1])
    for name, text in sorted(t.partition_outputs(out).items()):
        print(name, hashlib.sha256(text.encode()).hexdigest())
    """
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


def test_partitioning_twice_gives_identical_texts(tmp_path):
    first = partition_outputs(tmp_path / "first")
    second = partition_outputs(tmp_path / "second")
    assert sorted(first) == sorted(second)
    assert len([name for name in first if name.startswith("dump:")]) > 5
    for name in first:
        assert first[name] == second[name], f"{name} differs between two partitions"


def test_partitioning_in_processes_with_different_hash_seeds_gives_identical_texts(tmp_path):
    script = SCRIPT.format(tests_dir=str(pathlib.Path(__file__).parent))
    digests = []
    for seed in ("1", "4242"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        result = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path / seed)],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
            cwd=tmp_path,
        )
        assert result.returncode == 0, result.stderr[-4000:]
        digests.append(result.stdout)
    assert digests[0].count("\n") > 8
    assert digests[0] == digests[1]

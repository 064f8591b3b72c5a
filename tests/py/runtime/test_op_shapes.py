"""Operation shapes (``codegen.OpShape``): an operation made from a shape runs its own
code, slots and constants filled in, and operations of one shape share one compile."""

from __future__ import annotations

from jaxpp_mlir.runtime.execution.codegen import Fields, OpShape, source


def _send_shape(free: int) -> OpShape:
    fields = Fields()
    code = [f"{fields.slot()} = scale * {fields.slot()}{fields.comment()}"]
    return OpShape("send", code, fields, free, ("scale",))


def test_an_op_of_a_shape_runs_and_shows_its_own_code():
    shape = _send_shape(2)
    op = shape.make("a send", [3, 1, "channel 7", 1, 4], {"scale": 2})
    assert source(op) == (
        "def op(env):  # send: a send\n"
        "    env[3] = scale * env[1]  # channel 7\n"
        "    env[1] = None\n"
        "    env[4] = None\n"
    )
    assert (op.kind, op.what) == ("send", "a send")
    env = [0, 5, 0, 0, 9]
    op(env)
    assert env == [0, None, 0, 10, None]


def test_ops_of_one_shape_share_their_code_and_keep_their_own_slots():
    shape = _send_shape(0)
    first = shape.make("first", [1, 0, "a"], {"scale": 1})
    second = shape.make("second", [2, 1, "b"], {"scale": 3})
    assert first.__code__ is second.__code__
    env = [1, 2, 0]
    first(env)
    second(env)
    assert env == [1, 1, 3]
    assert source(second) == "def op(env):  # send: second\n    env[2] = scale * env[1]  # b\n"

"""The plan builder: a partitioned module and a schedule in, an ``ExecutionPlan`` out.

Modules, one job each: ``values`` (value numbering with typed ``refs``),
``instructions`` (one op as an instruction, a task as a pending executable),
``expansion`` (the loop per microbatch in the schedule's order), ``fusion``
(fused tasks as one executable), ``donation`` (which input buffers results
reuse), ``layouts`` (boundary layouts as data), ``emission`` (every module's
text, once), ``builder`` (the order of those steps, and the only module that
adds to the plan: the others take data and return instructions and
executables), ``specs`` (tensor specs of MLIR values).
"""

from .builder import BuiltPlan, build_plan
from .specs import dtype_name, tensor_spec

__all__ = ["BuiltPlan", "build_plan", "dtype_name", "tensor_spec"]

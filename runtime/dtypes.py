"""The one table of tensor element types: numpy dtype name <-> MLIR element type.

The compiler side reads MLIR types back into the dtype names of a ``TensorSpec``
(``jaxpp_mlir.plan``); the runtime transfers between processes only the dtypes
listed here (``collectives``, which types its modules through jax's bindings).
Names not listed are unsupported.
"""

from __future__ import annotations

ELEMENT_TYPES: dict[str, str] = {
    "float32": "f32",
    "float64": "f64",
    "float16": "f16",
    "bfloat16": "bf16",
    "bool": "i1",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "ui8",
    "uint16": "ui16",
    "uint32": "ui32",
    "uint64": "ui64",
    "complex64": "complex<f32>",
    "complex128": "complex<f64>",
}

DTYPE_NAMES: dict[str, str] = {element: dtype for dtype, element in ELEMENT_TYPES.items()}


def element_type(dtype: str) -> str | None:
    """The MLIR element type text of numpy dtype name ``dtype``; None if unsupported."""
    return ELEMENT_TYPES.get(dtype)


def dtype_name(element: str) -> str | None:
    """The numpy dtype name of MLIR element type text ``element`` (``si32`` reads as
    ``int32``); None if unsupported."""
    if element.startswith("si"):
        element = element[1:]
    return DTYPE_NAMES.get(element)

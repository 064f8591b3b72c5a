"""Imports every pass module so that each registers itself by name."""

from jaxpp_mlir.passes import (  # noqa: F401
    assign_stages,
    inline_calls,
    insert_transfers,
    normalize_loop,
    outline_outer_code,
    outline_stages,
    place_stages,
    split_backward,
    verify_program,
)

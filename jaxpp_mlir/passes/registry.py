"""Imports every pass module so that each registers itself by name."""

from jaxpp_mlir.passes import (  # noqa: F401
    assign_stages,
    check_host_callbacks,
    check_shardings,
    inline_calls,
    insert_transfers,
    materialize_replica_groups,
    merge_stages,
    normalize_loop,
    outline_outer_code,
    outline_stages,
    pack_accumulators,
    pack_parameters,
    place_stages,
    restore_sharding_constraints,
    split_accumulators,
    split_backward,
    verify_markers,
    verify_program,
)

"""Several processes: ``launch`` (the command line behind ``python -m jaxpp_mlir.launch``,
re-exporting the names below), ``supervision`` (its ``Launch`` of the child processes),
``child_setup`` (each child's command and environment), ``child_output`` (the children's
prefixed output), ``script_setup`` (``initialize_from_env``/``pipeline_devices`` for the
scripts it starts) and ``launch_args`` (its command-line checks)."""

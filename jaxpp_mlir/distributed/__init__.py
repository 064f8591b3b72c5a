"""The launcher's parts (``jaxpp_mlir.launch`` is the command line, ``python -m
jaxpp_mlir.launch``): ``supervision`` (its ``Launch`` of the child processes),
``child_setup`` (each child's command and environment), ``child_output`` (the children's
prefixed output), ``script_setup`` (``initialize_from_env``/``pipeline_devices`` for the
scripts it starts) and ``launch_args`` (its command-line checks)."""

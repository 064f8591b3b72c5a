"""Several processes: ``launch`` (the process supervisor behind ``python -m jaxpp_mlir.launch``,
and ``initialize_from_env``/``pipeline_devices`` for the scripts it starts) and
``launch_args`` (its command-line checks)."""

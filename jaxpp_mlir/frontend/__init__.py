"""Frontend: the pipeline stage marker users put into their models."""

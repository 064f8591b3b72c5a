"""Choosing the pipeline layout from the program: segment costs, stage splits, schedules."""

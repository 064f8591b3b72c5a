"""Running a plan in one process: argument placing, slots, the dispatch loop, replicated outputs."""

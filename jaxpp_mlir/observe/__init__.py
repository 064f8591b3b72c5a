"""Looking at a partitioned program: its summary (``summary``) and compile progress."""

"""Day 2 on the hardware: a plan change carried out on the running cluster (add, replace,
upgrade and remove hosts), step by step, resumable after an interruption."""

"""Day 2: reading live hosts (remote), comparing them with the plan (drift), what the teams
used (usage), and carrying a plan change out on the running cluster (change)."""

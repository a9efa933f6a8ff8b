"""Day 2: reading live hosts (remote), comparing them with the plan (drift), and usage."""

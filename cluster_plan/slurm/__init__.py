"""Slurm's decisions from the plan. Empty for now: slurm_policy moves here next (issue 26).
The pure parts of plugins/modules/slurm_accounts.py and slurm_reservation.py stay in those
modules, which run on the nodes where this package is not installed."""

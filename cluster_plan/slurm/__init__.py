"""Slurm: the plan's policy for slurm.conf (`policy`), the client commands and one parser of
their answers (`commands`), and the project's one drain (`drain`). The pure parts of
plugins/modules/slurm_accounts.py and slurm_reservation.py stay in those modules, which run on
the nodes where this package is not installed."""

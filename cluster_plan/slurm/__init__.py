"""Slurm's decisions from the plan: the policy of slurm.conf (partitions, QOS, GRES, topology,
fair share) and the one drain that the role and `cluster-plan change` share. The pure parts of
plugins/modules/slurm_accounts.py and slurm_reservation.py stay in those modules, which run on
the nodes where this package is not installed."""

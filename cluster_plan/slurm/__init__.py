"""Slurm: the plan's policy for slurm.conf (`policy`: partitions, QOS, GRES, topology, fair
share), the client commands and one parser of their answers (`commands`), and the one drain
that the role and `cluster-plan change` share (`drain`). The pure parts of
plugins/modules/slurm_accounts.py and slurm_reservation.py stay in those modules, which run on
the nodes where this package is not installed."""

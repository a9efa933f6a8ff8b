"""Usage per team: what the plan's teams have used of the cluster, from Slurm's accounting."""

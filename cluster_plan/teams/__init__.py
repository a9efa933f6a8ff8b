"""The plan's teams: who belongs to which team, and what each team may use. `policy` turns
them into the records Slurm's accounting is made from (kubernetes.teams makes the Kubernetes
objects); plugins/filter/team_policy.py only adapts it for the roles."""

"""Reaching the nodes: the one way every command that runs something on a node does it.

`execution` runs a command on a node through a prefix (SSH, nsenter into a lab node, a
user's own) and never raises for the command's sake; `options` is the one set of command-line
options that chooses the transport (`--transport`, `--ssh-*`, `--exec-prefix`) and builds
the executor from them; `lab` finds the running lab's nodes. `cluster-plan acceptance`,
`change` and `usage` reach nodes through it. `drift` and `backup status` read facts through
pyinfra sessions instead (cluster_plan.day2.remote), over the inventory's SSH settings.
"""

"""Reaching the nodes: the one way every command that runs something on a node does it.

`execution` runs a command on a node through a prefix (SSH, nsenter into a lab node, a
user's own) and never raises for the command's sake; `options` is the one set of command-line
options that chooses the transport (`--transport`, `--exec-prefix`) and says how SSH goes
(`--ssh-*`: `SshOptions`), and builds the executor from them; `lab` finds the running lab's
nodes. `cluster-plan acceptance`, `change` and `usage` run their commands through it; `drift`
and `backup status` read facts through pyinfra sessions (cluster_plan.day2.remote), over the
inventory's SSH settings and the same `--ssh-*` options.
"""

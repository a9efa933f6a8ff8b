"""Reading live hosts with pyinfra: facts (a command and its parser each), gathered in
parallel over the same SSH settings the inventory gives Ansible (the lab's admin-namespace
proxy included) and the user's `--ssh-*` (cluster_plan.transport's). Read-only: nothing here
changes a host.

`session.gather()` runs the gathering in a child process (`python -m
cluster_plan.day2.remote.gather`), because pyinfra's parallelism needs gevent's monkey-patching,
which must not leak into the caller (the CLI, a test run).
"""

"""Backups: the program every node runs from its timer (settings, borg, hooks, jobs, the
restore drill, schedule, restore; standard library only, shipped as a zip by
cluster_plan.node_bundle), and the controller's view of it, `cluster-plan backup status`."""

"""Acceptance: the cluster measured against the plan. The network (bandwidth, latency, loss and
MTU for every pair), the storage (Ceph's health, OSDs, placement groups, rados bench), the
collectives and training job through Slurm; the report (JSON and HTML), and the history of
runs that each run is compared with.

Pure parts (parsing, scheduling, verdicts, comparison, the report) take plain data; the
phases reach nodes only through an injected executor (cluster_plan.transport), and the history
is a SQLite file.
"""

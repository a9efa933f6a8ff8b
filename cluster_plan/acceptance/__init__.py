"""Network acceptance: bandwidth, latency, loss and MTU across the cluster, judged against the plan.

Pure parts (parsing, scheduling, verdicts, report) take plain data; only `runner` talks to
nodes, and only through an injected executor (cluster_plan.transport).
"""

"""Lab fixtures: the session-wide `lab` lives in cluster_plan.lab.pytest_plugin so that any
test directory can use it (see that module)."""

from cluster_plan.lab.pytest_plugin import lab

__all__ = ["lab"]

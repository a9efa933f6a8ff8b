"""The lab: the plan's cluster as systemd machines in Linux namespaces on one machine.

`cluster-plan lab up PLAN` builds it, `lab down PLAN` removes everything it made.
See docs/lab.md for what is real and what is a stand-in.
"""

from cluster_plan.lab.connection import connection_vars
from cluster_plan.lab.names import LabError

__all__ = ["LabError", "connection_vars"]

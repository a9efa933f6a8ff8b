"""Drift: the live cluster against the plan and the last converge (`cluster-plan drift`)."""

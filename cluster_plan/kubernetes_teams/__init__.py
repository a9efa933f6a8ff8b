"""The plan's teams as Kubernetes objects (namespaces, RBAC, quotas, limits, admission); see
cluster_plan/kubernetes_teams/objects.py and docs/scheduling.md. Written beside the Kubernetes
renderer (cluster_plan/kubernetes, in progress on its own branch) with its conventions, to be
rendered with its objects once it lands."""

from cluster_plan.kubernetes_teams.objects import dump_documents, team_objects

__all__ = ["dump_documents", "team_objects"]

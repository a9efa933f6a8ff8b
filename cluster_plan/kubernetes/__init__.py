"""The expanded plan as a Kubernetes cluster: kubeadm and kubelet configuration per node,
node labels and taints, device plugins, and the plan's scheduling policy as in-tree
admission policies. Pure: `render(expanded)` returns data; `write` puts it in files.
See docs/kubernetes.md."""

from cluster_plan.kubernetes.renderer import Rendering, dump_documents, files, render, write

__all__ = ["Rendering", "dump_documents", "files", "render", "write"]

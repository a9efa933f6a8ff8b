"""`cluster-plan k8s render PLAN [-o DIR]`: the plan's Kubernetes objects and configuration,
for review. Exit statuses as every subcommand's (cluster_plan.cli.policy): 0 ok; 1 the plan
cannot be a Kubernetes cluster, every finding printed; 2 the plan cannot be read."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from cluster_plan.cli.policy import Exit
from cluster_plan.kubernetes.bundle import command as bundle
from cluster_plan.plan.findings import PlanError


def register(subparsers: Any) -> None:
    k8s = subparsers.add_parser(
        "k8s",
        help="the plan as a Kubernetes cluster (kubeadm, kubelet, policy objects)",
        description="Kubernetes from the plan; see docs/kubernetes.md.",
    )
    sub = k8s.add_subparsers(dest="k8s_command", required=True, metavar="COMMAND")
    render = sub.add_parser(
        "render",
        help="write the Kubernetes objects and kubeadm/kubelet configuration",
        description="Render a Kubernetes plan. With -o DIR, write every file (objects, "
        "kubeadm and kubelet configuration per node, network and reservation settings, and "
        "prometheus-operator objects for a plan with monitoring, the example training job "
        "for a plan whose training class has a pytorch build and an image) under "
        "DIR and remove files of an earlier rendering that no longer apply; DIR must be new, "
        "empty or written by this command (its .cluster-plan-files.json lists what it wrote); "
        "without it, print the API objects as YAML.",
    )
    render.add_argument(
        "plan", metavar="PLAN", help="a cluster plan with scheduler.type kubernetes"
    )
    render.add_argument("-o", "--output", type=Path, metavar="DIR", help="write the files here")
    render.set_defaults(func=render_command)
    bundle.register(sub)


def render_command(args: argparse.Namespace) -> Exit:
    from cluster_plan.api import expand_validation
    from cluster_plan.kubernetes.renderer import dump_documents, render, write
    from cluster_plan.plan.validate import validate_file

    result = validate_file(args.plan)
    try:
        rendering = render(expand_validation(result))
    except PlanError as exc:  # point the renderer's findings at the plan's lines
        placed = [result.doc.place(f) if f.file is None else f for f in exc.findings]
        raise PlanError(placed, result.doc.source_lines) from None
    if args.output is None:
        sys.stdout.write(dump_documents(rendering.all_objects()))
        return Exit.OK
    written = write(rendering, args.output, str(args.plan))  # OSError, OutputError: named
    print(f"{args.output}: {len(written)} files for {len(rendering.plan.nodes)} nodes")
    return Exit.OK

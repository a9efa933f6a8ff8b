"""Node images on the session lab: each node boots the image its package set gives it, with
those packages installed before any role runs; the converge finds them installed (no install
task changes an imaged node), and what the roles record as theirs is exactly what the image
holds.

The install path itself is proven where nodes boot the bare base: the hosts the day-2 proof
adds (tests/roles/test_change_lab.py; a host joining a running lab boots bare) and any host a
plan lists in `lab.bare`.
"""

from __future__ import annotations

import json
import re

import pytest
from role_tasks import install_tasks
from support.lab_session import Converged, Lab, converged_lab, lab  # noqa: F401

from cluster_plan.lab import images, rootfs, status
from cluster_plan.lab.role_packages import host_packages, load_role_vars

pytestmark = pytest.mark.lab

TASK = re.compile(r"^TASK \[(?:[\w.]+ : )?(.+?)\]")
CHANGED = re.compile(r"^changed: \[([^\]]+)\]")
MANIFESTS = (
    'python3 -c \'import glob, json; print(json.dumps({p: json.load(open(p)).get("packages", [])'
    ' for p in glob.glob("/var/lib/cluster-plan/manifest/*.json")}))\''
)


def installed(node_lab: Lab, host: str, packages: set[str]) -> set[str]:
    """Which of `packages` dpkg has installed on the node."""
    shown = node_lab.in_node(
        host,
        ["dpkg-query", "--show", "--showformat=${db:Status-Status} ${Package}\\n", *packages],
        check=False,
    ).stdout
    return {line.split()[1] for line in shown.splitlines() if line.startswith("installed ")}


def test_each_node_boots_its_image_with_the_roles_packages_installed(lab: Lab) -> None:  # noqa: F811
    packages = host_packages(lab.expanded, load_role_vars())
    layers = images.node_layers(lab.expanded, packages, rootfs.cache_key())
    report = status.collect(lab.names, lab.expanded)
    for host, chain in layers.items():
        assert chain, f"{host}: the lab plan gives every host an image"
        assert report["nodes"][host]["image"] == chain[0].name
        wanted = set(packages[host].names)
        assert installed(lab, host, wanted) == wanted, host


def test_the_converge_finds_the_packages_installed_and_records_no_others(
    lab: Lab,  # noqa: F811
    converged_lab: Converged,  # noqa: F811
) -> None:
    first, _second = converged_lab.require_runs()
    titles = {task.title for task in install_tasks()}
    changed, task = set(), ""
    for line in first.output.splitlines():
        if found := TASK.match(line):
            task = found.group(1)
        elif (hit := CHANGED.match(line)) and task in titles:
            changed.add(f"{task}: {hit.group(1)}")
    assert changed == set(), "an install task changed an imaged node"
    packages = host_packages(lab.expanded, load_role_vars())
    tools = set(load_role_vars()["net_acceptance_os_packages"])  # the one role without a record
    for host in lab.expanded["hosts"]:
        records = json.loads(lab.in_node(host, ["sh", "-c", MANIFESTS]).stdout)
        recorded = set().union(*records.values()) | tools
        # the common role records the apt module's bindings too, which the base image holds
        assert recorded == set(packages[host].names) | {"python3-apt"}, host

"""The packages the roles install on each host (cluster_plan/lab/role_packages.py), against
the roles themselves: every install task's package list is one the function knows, with the
task's own Recommends setting, so a node image built from it never drifts from the roles."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from role_tasks import APT_GET_INSTALL, Task, definitions, identifiers, install_tasks, task_files

from cluster_plan.api import load_expanded
from cluster_plan.lab import rootfs
from cluster_plan.lab.role_packages import (
    INSTALLS,
    LEFT_TO_THE_ROLES,
    ROLES,
    Install,
    LeftOut,
    host_packages,
    load_role_vars,
)

PLAN = ROLES.parent / "inventory" / "lab" / "cluster.yml"


def package_lists(roles: Path = ROLES) -> dict[str, str]:
    """The literal package lists of the roles' vars/Debian.yml: variable -> role."""
    found = {}
    for path in roles.glob("*/vars/Debian.yml"):
        for name, value in (yaml.safe_load(path.read_text()) or {}).items():
            values = list(value.values()) if isinstance(value, dict) else [value]
            if values and all(
                isinstance(v, list) and v and all(isinstance(x, str) for x in v) for v in values
            ):
                found[name] = path.parts[-3]
    return found


def lists_reached(task: Task, known: set[str], defined: dict[str, Any]) -> set[str]:
    """The package lists a task's `name:` comes to, through the variables it is made of,
    stopping at those `known`."""
    reached: set[str] = set()
    lists = package_lists()
    seen: set[str] = set()
    pending = list(identifiers(task.names))
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in known or name in lists:
            reached.add(name)
            continue
        pending.extend(identifiers(task.local_vars.get(name, defined.get(name))))
    return reached


def coverage_gaps(installs: tuple[Install, ...], left_out: tuple[LeftOut, ...]) -> list[str]:
    """Every install task's package list that the function does not know, or knows with
    another Recommends setting than the task's."""
    recommends = {i.variable: i.recommends for i in installs}
    known = set(recommends) | {left.variable for left in left_out}
    defined = definitions()
    gaps = []
    for task in install_tasks():
        where = f"{task.path.relative_to(ROLES.parent)} ({task.names.strip()})"
        for name in sorted(lists_reached(task, known, defined)):
            if name not in known:
                gaps.append(f"{where}: {name} is neither in INSTALLS nor LEFT_TO_THE_ROLES")
            elif name in recommends and recommends[name] != task.recommends:
                gaps.append(f"{where}: {name} installs with Recommends={task.recommends}")
    return gaps


def test_every_install_task_of_the_roles_is_known_with_its_recommends() -> None:
    assert install_tasks(), "no install task found: the walk is broken"
    assert coverage_gaps(INSTALLS, LEFT_TO_THE_ROLES) == []


def test_a_package_list_the_function_does_not_know_is_found() -> None:
    """The check above can fail: each kind of gap is reported, naming the task."""
    without_common = tuple(i for i in INSTALLS if i.variable != "common_packages")
    gaps = coverage_gaps(without_common, LEFT_TO_THE_ROLES)
    assert gaps == [
        "roles/common/tasks/packages.yml ({{ common_packages }}): common_packages is neither "
        "in INSTALLS nor LEFT_TO_THE_ROLES"
    ]
    flipped = tuple(
        replace(i, recommends=True) if i.variable == "ceph_packages_osd" else i for i in INSTALLS
    )
    assert any("ceph_packages_osd installs with Recommends=False" in g for g in
               coverage_gaps(flipped, LEFT_TO_THE_ROLES))  # fmt: skip
    without_driver = tuple(x for x in LEFT_TO_THE_ROLES if x.role != "nvidia_driver")
    assert any("nvidia_driver_os_packages is neither" in g for g in
               coverage_gaps(INSTALLS, without_driver))  # fmt: skip


def test_every_known_list_is_a_list_of_the_role_it_names() -> None:
    lists = package_lists()
    plan_named = {"software_debian_packages"}  # the plan's software section names them
    for entry in (*INSTALLS, *LEFT_TO_THE_ROLES):
        if entry.variable in plan_named:
            assert entry.variable in definitions()
            continue
        assert lists.get(entry.variable) == entry.role, entry


def test_the_packages_shell_tasks_install_are_in_the_base_image() -> None:
    """A role that installs with apt-get in a shell task (the apt module's own bindings)
    finds them in the base image."""
    named = set()
    for _role, _path, task in task_files():
        for module in ("ansible.builtin.shell", "ansible.builtin.command"):
            text = str(task.get(module) or "")
            for _flags, names in APT_GET_INSTALL.findall(text):
                named.update(names.split())
    assert named == {"python3-apt"}
    assert named <= set(rootfs.PACKAGES)


@pytest.fixture(scope="module")
def expanded() -> dict[str, Any]:
    return load_expanded(str(PLAN))


@pytest.fixture(scope="module")
def role_vars() -> dict[str, Any]:
    return load_role_vars()


def test_each_lab_host_gets_what_its_roles_install(
    expanded: dict[str, Any], role_vars: dict[str, Any]
) -> None:
    found = host_packages(expanded, role_vars)
    assert set(found) == set(expanded["hosts"])
    every = {"chrony", "nftables", "iperf3", "fping", "borgbackup", "prometheus-node-exporter"}
    every |= {"python3-prometheus-client"}  # the clock collector runs on every monitored host
    assert all(every <= p.names for p in found.values())
    head = found["head01"]
    assert {"slurmctld", "slurmdbd", "mariadb-server", "nfs-ganesha", "nfs-ganesha-ceph"} <= (
        head.recommends
    )
    assert {"prometheus", "prometheus-alertmanager", "ceph-mgr", "ceph-mds", "ceph-fuse"} <= (
        head.plain
    )
    assert "libnfs-utils" not in head.names  # the NFS server mounts no export
    gpu = found["gpu01"]
    assert {"python3-torch", "openmpi-bin", "lmod", "python3-prometheus-client"} <= gpu.plain
    assert "python3-torch" not in found["cpu01"].names  # only the training pool's builds
    assert {"slurmd", "libnfs-utils"} <= found["cpu01"].recommends
    stor = found["stor01"]
    assert {"ceph-mon", "ceph-osd", "udev"} <= stor.plain and "slurm-client" not in stor.names
    assert "ceph-fuse" not in stor.names  # not a CephFS client
    osd = found["osd01"]
    assert "slurmctld" in osd.recommends and "libnfs-utils" not in osd.names  # off compute
    assert "slurmdbd" not in osd.names  # the plan's slurmdbd host is head01
    assert not head.recommends & head.plain


def test_the_roles_choices_follow_the_plan(
    expanded: dict[str, Any], role_vars: dict[str, Any]
) -> None:
    # real hosts mount the exports with the kernel client
    assert "nfs-common" in host_packages(expanded, role_vars, container=False)["cpu01"].names
    # a Ceph release Debian does not ship comes from Ceph's repository, which the role adds
    plan = copy.deepcopy(expanded)
    plan["storage"]["ceph"]["release"] = "reef"
    assert not any(p.startswith("ceph") for p in host_packages(plan, role_vars)["stor01"].names)
    # no backups, no borg; no monitoring server, no exporter
    plan = copy.deepcopy(expanded)
    plan["backups"] = None
    plan["monitoring"] = None
    names = host_packages(plan, role_vars)["gpu01"].names
    assert "borgbackup" not in names and "prometheus-node-exporter" not in names
    # without accounting, no slurmdbd
    plan = copy.deepcopy(expanded)
    plan["scheduler"]["slurm"]["accounting"] = False
    assert "mariadb-server" not in host_packages(plan, role_vars)["head01"].names
    # on Kubernetes the pods run the training image: no host gets the software section's builds
    plan = copy.deepcopy(expanded)
    plan["scheduler"]["type"] = "kubernetes"
    gpu = host_packages(plan, role_vars)["gpu01"]
    assert not {"python3-torch", "openmpi-bin", "lmod"} & gpu.names
    assert "chrony" in gpu.names  # the other roles' packages stay


def test_a_list_that_is_not_package_names_is_refused(
    expanded: dict[str, Any], role_vars: dict[str, Any]
) -> None:
    broken = {**role_vars, "common_packages": "{{ something }}"}
    with pytest.raises(ValueError, match="common_packages is not a list of package names"):
        host_packages(expanded, broken)

"""The Debian packages the roles install on each host of a plan, read from the roles' own
package lists (roles/*/vars/Debian.yml), so that a node image built from them never drifts
from what the roles install.

Which lists a host gets follows each role's own choice (its groups, the plan's sections),
through the pure functions the roles' filters call where there are some. `INSTALLS` names
every list the image takes, with whether the role's task installs Recommends;
`LEFT_TO_THE_ROLES` the lists an image cannot hold, with the reason. tests/lab/test_role_packages.py
fails on any install task of a role whose package list is in neither.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import yaml

from cluster_plan.monitoring.targets import monitoring_server
from cluster_plan.plan.contract import ExpandedPlan
from cluster_plan.software import role_view as software
from cluster_plan.storage.ceph import ceph_cephfs, ceph_cephfs_clients, ceph_nfs_groups
from cluster_plan.storage.nfs import nfs_client_mounts, nfs_exports

ROLES = Path(__file__).resolve().parents[2] / "roles"
DISTRIBUTION = "Debian"
# Where a role's variables come from, last wins as in Ansible: defaults, then the vars files.
VARIABLE_FILES = ("defaults/main.yml", "vars/main.yml", f"vars/{DISTRIBUTION}.yml")

RoleVars = Mapping[str, Any]


@dataclass(frozen=True)
class Install:
    """A package list of a role's install task, as the image installs it."""

    role: str
    variable: str  # the list: a variable of the role's vars/Debian.yml (or the plan's, below)
    recommends: bool  # the task installs Recommends (apt's default) or not (install_recommends)


@dataclass(frozen=True)
class LeftOut:
    """A package list an image does not hold: the role installs it on the node itself."""

    role: str
    variable: str
    reason: str


INSTALLS = (
    Install("common", "common_packages", True),
    Install("ceph", "ceph_packages_common", False),
    Install("ceph", "ceph_packages_mon", False),
    Install("ceph", "ceph_packages_mgr", False),
    Install("ceph", "ceph_packages_osd", False),
    Install("ceph", "ceph_packages_mds", False),
    Install("ceph", "ceph_packages_fuse", False),
    Install("nfs", "nfs_server_packages", True),
    Install("nfs", "nfs_backend_packages", True),
    Install("nfs", "nfs_client_packages", True),
    Install("nfs", "nfs_userspace_client_packages", True),
    # the plan's software section names these (plan_host.software), not a vars file
    Install("software", "software_debian_packages", False),
    Install("software", "software_lmod_packages", False),
    Install("software", "software_venv_packages", False),
    Install("slurm", "slurm_packages_common", True),
    Install("slurm", "slurm_packages_controller", True),
    Install("slurm", "slurm_packages_compute", True),
    Install("slurm", "slurm_packages_dbd", True),
    Install("containerd", "containerd_os_packages", True),
    Install("backup", "backup_packages", False),
    Install("backup", "backup_server_packages", False),
    Install("monitoring", "monitoring_node_packages", False),
    Install("monitoring", "monitoring_collector_packages", False),
    Install("monitoring", "monitoring_server_packages", False),
    Install("net_acceptance", "net_acceptance_os_packages", True),
)

_DRIVER = (
    "only where an NVIDIA GPU is on the PCI bus and the kernel is the node's own, "
    "built by DKMS against the running kernel: no image can know either"
)
LEFT_TO_THE_ROLES = (
    LeftOut("nvidia_driver", "nvidia_driver_os_prerequisites", _DRIVER),
    LeftOut("nvidia_driver", "nvidia_driver_os_packages", _DRIVER),
    LeftOut("nvidia_driver", "nvidia_driver_os_fabricmanager_packages", _DRIVER),
    LeftOut("nvidia_driver", "nvidia_driver_os_container_toolkit_packages", _DRIVER),
    LeftOut(
        "kubernetes",
        "kubernetes_os_packages",
        "from the Kubernetes project's repository at the plan's version, not Debian's archive",
    ),
    LeftOut(
        "k8s_mirror",
        "k8s_mirror_os_packages",
        "the mirror host's registry and web server, for a Kubernetes plan with a mirror; the "
        "Kubernetes lab plan boots its nodes on the bare base",
    ),
)


@dataclass(frozen=True)
class HostPackages:
    """What the roles install on one host: with Recommends, and without."""

    recommends: frozenset[str] = frozenset()
    plain: frozenset[str] = frozenset()

    @property
    def names(self) -> frozenset[str]:
        return self.recommends | self.plain

    def __and__(self, other: HostPackages) -> HostPackages:
        return HostPackages(self.recommends & other.recommends, self.plain & other.plain)

    def __sub__(self, other: HostPackages) -> HostPackages:
        return HostPackages(self.recommends - other.recommends, self.plain - other.plain)


def load_role_vars(roles: Path = ROLES) -> dict[str, Any]:
    """Every role's variables on Debian, by name (role variables carry the role's prefix)."""
    found: dict[str, Any] = {}
    for role in sorted(p for p in roles.iterdir() if p.is_dir()):
        for name in VARIABLE_FILES:
            path = role / name
            if path.is_file():
                found.update(yaml.safe_load(path.read_text()) or {})
    return found


@dataclass(frozen=True)
class _Plan:
    """The plan as the roles' choices read it."""

    expanded: ExpandedPlan
    role_vars: RoleVars
    container: bool

    def group(self, name: str) -> list[str]:
        return list(self.expanded["groups"].get(name) or [])

    def listed(self, variable: str) -> list[str]:
        value = self.role_vars[variable]
        if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise ValueError(f"{variable} is not a list of package names in the roles")
        return list(value)


Chosen = Iterator[tuple[str, list[str]]]  # (the list's variable, its packages)


def _common(_p: _Plan, _host: str) -> Chosen:
    yield "common_packages", _p.listed("common_packages")


def _ceph(p: _Plan, host: str) -> Chosen:
    plan: Any = p.expanded
    release = ((plan.get("storage") or {}).get("ceph") or {}).get("release") or ""
    source = jinja2.Environment().from_string(p.role_vars["ceph_repository"])
    if source.render(ceph_release=release) != "distribution":
        return  # the upstream repository: the role adds it and installs from it
    daemons = [d for d in ("mon", "mgr", "osd", "mds") if host in p.group(f"ceph_{d}")]
    clients = ceph_cephfs_clients(plan, list(plan["hosts"].values()))
    gateways = p.group("nfs_server") if ceph_nfs_groups(plan) else []
    if not daemons and host not in clients and host not in gateways:
        return
    yield "ceph_packages_common", p.listed("ceph_packages_common")
    for daemon in daemons:
        yield f"ceph_packages_{daemon}", p.listed(f"ceph_packages_{daemon}")
    if host in clients and (ceph_cephfs(plan) or {}).get("client") == "fuse":
        yield "ceph_packages_fuse", p.listed("ceph_packages_fuse")


def _nfs(p: _Plan, host: str) -> Chosen:
    plan: Any = p.expanded
    exports = nfs_exports(plan)
    if host in p.group("nfs_server") and exports:
        yield "nfs_server_packages", p.listed("nfs_server_packages")
        backends = p.role_vars["nfs_backend_packages"]
        for backend in sorted({e["backend"] for e in exports}):
            yield "nfs_backend_packages", list(backends[backend])
    if nfs_client_mounts(plan, plan["hosts"][host]):
        chosen = "nfs_userspace_client_packages" if p.container else "nfs_client_packages"
        yield chosen, p.listed(chosen)


def _software(p: _Plan, host: str) -> Chosen:
    scheduler = p.expanded.get("scheduler")
    environments = software.software_host_builds(p.expanded["hosts"][host], scheduler)
    yield "software_debian_packages", software.software_packages(environments)
    if software.software_modules(environments, str(p.role_vars["software_modulefiles_dir"])):
        yield "software_lmod_packages", p.listed("software_lmod_packages")
    play = {
        name: {"plan_host": spec, "cluster_plan": {"scheduler": scheduler}}
        for name, spec in p.expanded["hosts"].items()
    }
    if software.software_pip_installs(play, host):
        yield "software_venv_packages", p.listed("software_venv_packages")


def _slurm(p: _Plan, host: str) -> Chosen:
    controllers = p.group("slurm_controller")
    computes = p.group("slurm_compute")
    dbds = p.group("slurmdbd") or controllers
    if host not in {*controllers, *computes, *p.group("slurmdbd")}:
        return  # the Slurm play's hosts
    scheduler: Any = p.expanded.get("scheduler") or {}
    yield "slurm_packages_common", p.listed("slurm_packages_common")
    if host in controllers:
        yield "slurm_packages_controller", p.listed("slurm_packages_controller")
    if host in computes:
        yield "slurm_packages_compute", p.listed("slurm_packages_compute")
    if (scheduler.get("slurm") or {}).get("accounting") and host in dbds:
        yield "slurm_packages_dbd", p.listed("slurm_packages_dbd")


def _containerd(p: _Plan, host: str) -> Chosen:
    if host in {*p.group("k8s_control_plane"), *p.group("k8s_worker")}:
        yield "containerd_os_packages", p.listed("containerd_os_packages")


def _backup(p: _Plan, host: str) -> Chosen:
    backups: Any = p.expanded.get("backups")
    if backups is None:
        return
    yield "backup_packages", p.listed("backup_packages")
    targets = [backups["target"], *([backups["offsite"]] if backups.get("offsite") else [])]
    if host in {t["host"] for t in targets}:
        yield "backup_server_packages", p.listed("backup_server_packages")


def _monitoring(p: _Plan, host: str) -> Chosen:
    server = monitoring_server(p.expanded) if p.expanded.get("monitoring") else None
    if server is None:
        return
    yield "monitoring_node_packages", p.listed("monitoring_node_packages")
    # the clock collector runs on every monitored host, so each needs the collectors' Python
    yield "monitoring_collector_packages", p.listed("monitoring_collector_packages")
    if host == server["hostname"]:
        yield "monitoring_server_packages", p.listed("monitoring_server_packages")


def _net_acceptance(p: _Plan, _host: str) -> Chosen:
    yield "net_acceptance_os_packages", p.listed("net_acceptance_os_packages")


# In site.yml's order: the stages that install, each choosing as its role does.
CHOICES: tuple[Callable[[_Plan, str], Chosen], ...] = (
    _common,
    _ceph,
    _nfs,
    _software,
    _slurm,
    _containerd,
    _backup,
    _monitoring,
    _net_acceptance,
)


def host_packages(
    expanded: ExpandedPlan, role_vars: RoleVars, container: bool = True
) -> dict[str, HostPackages]:
    """Each host's Debian packages, as the roles install them on a Debian 12 host.
    `container`: the hosts are containers to Ansible (lab nodes are), which gives NFS
    clients the user-space tools instead of the kernel client's."""
    plan = _Plan(expanded, role_vars, container)
    recommends = {i.variable: i.recommends for i in INSTALLS}
    found = {}
    for host in expanded["hosts"]:
        with_rec: set[str] = set()
        plain: set[str] = set()
        for choose in CHOICES:
            for variable, packages in choose(plan, host):
                (with_rec if recommends[variable] else plain).update(packages)
        found[host] = HostPackages(frozenset(with_rec), frozenset(plain - with_rec))
    return found

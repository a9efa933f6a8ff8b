"""What the software role installs on one host, as plain data from the host's builds
(environment -> build, plan_host.software); the filters of plugins/filter/software_plan.py."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any


def software_in_image(scheduler: Mapping[str, Any] | None) -> bool:
    """On a Kubernetes plan the software section says what the training image carries: the
    pods run that image, never the hosts' builds, so the hosts get none of them."""
    return isinstance(scheduler, Mapping) and scheduler.get("type") == "kubernetes"


def software_host_builds(
    plan_host: Mapping[str, Any] | None, scheduler: Mapping[str, Any] | None
) -> Mapping[str, Any]:
    """The builds the role installs on a host of the plan: the host's (plan_host.software),
    none on a plan whose pods run them from an image (software_in_image)."""
    if software_in_image(scheduler):
        return {}
    builds = (plan_host or {}).get("software")
    return builds if isinstance(builds, Mapping) else {}


def _builds(environments: Mapping[str, Any] | None) -> list[tuple[str, Mapping[str, Any]]]:
    return sorted((environments or {}).items())


def software_packages(environments: Mapping[str, Any] | None) -> list[str]:
    """The Debian packages of the host's Debian builds, each once, sorted: one apt run."""
    return sorted(
        {
            str(package)
            for _, build in _builds(environments)
            if build.get("source") == "debian"
            for package in build.get("packages") or []
        }
    )


def software_pip_builds(environments: Mapping[str, Any] | None) -> list[str]:
    """The host's pip builds, as `environment version`."""
    return [
        f"{env} {build.get('version')}"
        for env, build in _builds(environments)
        if build.get("source") == "pip"
    ]


def software_modules(
    environments: Mapping[str, Any] | None, modulefiles_dir: str
) -> list[dict[str, Any]]:
    """One Lmod module per build that names one: what its modulefile says and where it goes
    (`<modulefiles_dir>/<name>/<version>.lua`, so `module load name/version` finds it)."""
    modules = []
    for env, build in _builds(environments):
        module = build.get("module")
        if not module:
            continue
        name, _, version = str(module).partition("/")
        prefix = build.get("prefix")
        modules.append(
            {
                "environment": env,
                "module": str(module),
                "name": name,
                "version": version,
                "build_version": str(build.get("version")),
                "path": posixpath.join(modulefiles_dir, name, f"{version}.lua"),
                "source": build.get("source"),
                "build": build.get("build"),
                "packages": list(build.get("packages") or []),
                "prefix": prefix,
                # a pip build's programs (torchrun, python) come first on PATH
                "bin": posixpath.join(str(prefix), "bin") if prefix else None,
            }
        )
    return modules


def _host_environments(variables: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """A host's builds as the role sees them: its software_environments where set (host vars,
    -e), else the plan's (software_host_builds, the role's default)."""
    chosen = variables.get("software_environments")
    if chosen is None:
        scheduler = (variables.get("cluster_plan") or {}).get("scheduler")
        chosen = software_host_builds(variables.get("plan_host"), scheduler)
    return chosen if isinstance(chosen, Mapping) else None


def software_pip_installs(
    play_hosts: Mapping[str, Mapping[str, Any]], host: str
) -> list[dict[str, Any]]:
    """The pip builds `host` installs: each prefix once, by the first host (in the play's order)
    that gets it. The prefix is on a shared file system every host of the build mounts
    (validate checks it), so one install serves them all and no two hosts write it at once.
    `play_hosts`: each play host's variables (Ansible's hostvars), in the play's order."""
    hosts_environments = {name: _host_environments(v) for name, v in play_hosts.items()}
    first: dict[str, str] = {}
    for name, environments in hosts_environments.items():
        for _, build in _builds(environments):
            if build.get("source") == "pip" and build.get("prefix"):
                first.setdefault(str(build["prefix"]), name)
    return [
        {
            "environment": env,
            "version": str(build.get("version")),
            "packages": list(build.get("packages") or []),
            "prefix": str(build["prefix"]),
            "index_url": build.get("index_url"),
        }
        for env, build in _builds(hosts_environments.get(host))
        if build.get("source") == "pip" and first.get(str(build.get("prefix"))) == host
    ]

"""Where builds land on a host: one Lmod module file per name/version, one virtual environment
per prefix. Two builds that share either overwrite each other (docs/software.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cluster_plan.plan.checks.base import Plan, first_names
from cluster_plan.plan.findings import Finding
from cluster_plan.plan.nodes import Node
from cluster_plan.plan.software import Build, build_hosts, builds


def check_software_places(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    placed = [(env, i, build, build_hosts(plan, build, nodes)) for env, i, build in builds(plan)]
    yield from _modules(placed)
    yield from _prefixes(placed)


Placed = tuple[str, int, Build, list[Node]]


def _modules(placed: list[Placed]) -> Iterator[Finding]:
    """A module name/version is one file on each host: two builds that give it to one host."""
    for k, (env, i, build, hosts) in enumerate(placed):
        module = build.get("module")
        if not isinstance(module, str):
            continue
        for other_env, j, other, other_hosts in placed[:k]:
            shared = sorted({n.name for n in hosts} & {n.name for n in other_hosts})
            if other.get("module") == module and shared and other_env != env:
                yield Finding(
                    "software-module-conflict",
                    f"{env} and {other_env} (build #{j}) both write the Lmod module {module} "
                    f"on {first_names(shared)}: one modulefile, the second build overwrites "
                    "the first",
                    ("software", "environments", env, i, "module"),
                    hint=f"give each environment its own module (e.g. {env}/"
                    f"{module.split('/', 1)[-1]})",
                )
                break


def _content(env: str, build: Build) -> tuple[Any, ...]:
    return (env, build.get("version"), tuple(build.get("packages") or ()),
            build.get("index_url"), build.get("build"))  # fmt: skip


def _nested(a: str, b: str) -> bool:
    return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")


def _prefixes(placed: list[Placed]) -> Iterator[Finding]:
    """A prefix is one virtual environment on a shared file system, whichever hosts use it:
    two different builds there (or one inside the other's) install over each other."""
    for k, (env, i, build, _) in enumerate(placed):
        prefix = build.get("prefix")
        if build.get("source") != "pip" or not isinstance(prefix, str):
            continue
        for other_env, j, other, _ in placed[:k]:
            theirs = other.get("prefix")
            if other.get("source") != "pip" or not isinstance(theirs, str):
                continue
            if _nested(prefix, theirs) and _content(env, build) != _content(other_env, other):
                yield Finding(
                    "software-prefix-conflict",
                    f"{env} {build.get('version')} installs into {prefix}, where {other_env} "
                    f"{other.get('version')} (build #{j}) has its virtual environment"
                    + ("" if prefix == theirs else f" ({theirs})")
                    + ": pip would install one over the other",
                    ("software", "environments", env, i, "prefix"),
                    hint=f"give each build its own prefix, e.g. "
                    f"{theirs.rstrip('/').rsplit('/', 1)[0]}/{env}/{build.get('version')}",
                )
                break

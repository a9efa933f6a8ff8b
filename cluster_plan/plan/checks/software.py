"""Software: every build of an environment names classes and pools that exist, asks its source
for what the source can give (cluster_plan/plan/software_catalog.py), goes only to hosts that can
run it (a CUDA build to NVIDIA GPUs) and see it (a pip prefix on a file system they mount),
and a host gets one build of each environment."""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator
from typing import Any

from cluster_plan.plan import software_catalog as catalog
from cluster_plan.plan.catalog import load_catalog
from cluster_plan.plan.checks.base import Plan, first_names
from cluster_plan.plan.checks.hints import missing
from cluster_plan.plan.findings import Finding, JsonPath
from cluster_plan.plan.nodes import Node
from cluster_plan.plan.schema import grammar
from cluster_plan.plan.software import (
    Build,
    build_hosts,
    builds,
    host_builds,
    host_mounts,
    on_mount,
)

# Debian Policy 5.6.1: lower-case letters, digits, '+', '-' and '.', a letter or digit first,
# at least two characters. apt looks up any other name in vain.
_DEBIAN_NAME = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")


def _fits(value: object, name: str) -> bool:
    """Whether ``value`` is in the plan grammar ``name``: what is not, the schema reported,
    and the checks below leave alone (a finding never repeats a refused string)."""
    pattern, longest, _ = grammar(name)
    if not isinstance(value, str) or not pattern.search(value):
        return False
    return longest is None or len(value) <= longest


def check_software(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    for env, i, build in builds(plan):
        path: JsonPath = ("software", "environments", env, i)
        named = yield from _references(plan, build, path, nodes)
        if named:
            yield from _source(plan, env, build, path)
            hosts = build_hosts(plan, build, nodes)
            yield from _cuda_hosts(plan, env, build, hosts, path)
            yield from _prefix(plan, env, build, hosts, path)
    yield from _conflicts(plan, nodes)


def _references(
    plan: Plan, build: Build, path: JsonPath, nodes: list[Node]
) -> Generator[Finding, None, bool]:
    """Unknown classes and pools; True (the generator's value) when the build names only
    known ones and at least one."""
    scheduler = plan.get("scheduler") or {}
    classes = scheduler.get("workload_classes") or {}
    pools = sorted({node.pool for node in nodes if node.pool})
    known = True
    for k, name in enumerate(build.get("classes") or []):
        if name not in classes:
            known = False
            yield missing("workload class", name, classes, (*path, "classes", k))
    for k, name in enumerate(build.get("pools") or []):
        if name not in pools:
            known = False
            yield missing("pool", name, pools, (*path, "pools", k))
    if not build.get("classes") and not build.get("pools"):
        yield Finding(
            "software-no-hosts",
            "this build names no workload class and no pool: no host would get it",
            path,
            hint="add classes: [<class>] or pools: [<pool>]",
        )
        return False
    return known


def _source(plan: Plan, env: str, build: Build, path: JsonPath) -> Iterator[Finding]:
    if build.get("source") == "debian":
        yield from _debian(plan, env, build, path)
    else:
        yield from _pip_build(env, build, path)


def _debian(plan: Plan, env: str, build: Build, path: JsonPath) -> Iterator[Finding]:
    os_name = (plan.get("cluster") or {}).get("os")
    if os_name != catalog.DEBIAN_OS:
        yield Finding(
            "software-source",
            f"{env} comes from Debian's packages, but the nodes run "
            f"{os_name or 'an OS the plan does not name'}: the catalog knows "
            f"{catalog.DEBIAN_OS} ({catalog.DEBIAN_RELEASE}) only",
            (*path, "source"),
            hint=f"set cluster.os: {catalog.DEBIAN_OS}, or install it with pip into a prefix",
        )
        return
    for key in ("prefix", "index_url"):
        if build.get(key) is not None:
            yield Finding(
                "software-source",
                f"{key} is for pip builds: Debian's packages are installed system-wide by apt",
                (*path, key),
                hint=f"remove {key}, or use source: pip",
            )
    if build.get("build") == "cuda":
        yield Finding(
            "software-version",
            f"Debian {catalog.DEBIAN_RELEASE}'s packages are CPU builds: it has no CUDA build "
            f"of {env}",
            (*path, "build"),
            hint="use source: pip with build: cuda (e.g. torch and nvidia-nccl-cu12)",
        )
    yield from _debian_names(build, path)
    yield from _debian_version(env, build, path)


def _debian_names(build: Build, path: JsonPath) -> Iterator[Finding]:
    for k, package in enumerate(build.get("packages") or []):
        if _fits(package, "package_name") and not _DEBIAN_NAME.match(package):
            yield Finding(
                "software-package-name",
                f"{package!r} cannot be a Debian package: Debian's names are lower-case "
                "letters, digits, '+', '-' and '.'",
                (*path, "packages", k),
                hint=f"Debian's name, e.g. {package.lower().replace('_', '-')}; or source: pip",
            )


def _debian_version(env: str, build: Build, path: JsonPath) -> Iterator[Finding]:
    package, version = build["packages"][0], build["version"]
    if not (_fits(package, "package_name") and _fits(version, "software_version")):
        return
    given = catalog.debian_version(package)
    if given is None:
        yield Finding(
            "software-version-unchecked",
            f"the catalog does not know Debian's {package}: {env} {version} is not checked",
            (*path, "packages", 0),
            severity="warning",
            hint="known: " + ", ".join(sorted(catalog.DEBIAN_PACKAGES)),
        )
    elif not catalog.version_matches(version, given):
        yield Finding(
            "software-version",
            f"Debian {catalog.DEBIAN_RELEASE} gives {package} {given}, not {version}: "
            f"a debian source cannot give {env} {version}",
            (*path, "version"),
            hint=f"ask for {'.'.join(given.split('.')[:2])}, or install {version} with pip "
            "into a prefix",
        )


# PyTorch's wheel indexes and local version tags name a flavour: cpu, cu121 (CUDA 12.1),
# rocm6.2. A build asks for one flavour; its tag and its index must name the same.
_INDEX_FLAVOUR = re.compile(r"/whl/(?:nightly/|test/)?(cpu|cu\d{2,3}|rocm\d+(?:\.\d+)*)(?:/|$)")
_TAG_FLAVOUR = re.compile(r"\+(cpu|cu\d{2,3}|rocm\d+(?:\.\d+)*)$")


def _flavour(pattern: re.Pattern[str], value: object) -> str | None:
    found = pattern.search(value) if isinstance(value, str) else None
    return found.group(1) if found else None


def _cuda(flavour: str) -> bool:
    return flavour.startswith("cu")


def _pip_flavours(env: str, build: Build, path: JsonPath) -> Iterator[Finding]:
    """The build (cpu, cuda), its version's tag and its index name one flavour of wheels."""
    cuda = build.get("build") == "cuda"
    kind = "a CUDA" if cuda else "a CPU"
    tag = _flavour(_TAG_FLAVOUR, build.get("version"))
    index = _flavour(_INDEX_FLAVOUR, build.get("index_url"))
    if tag is not None and _cuda(tag) != cuda:
        yield Finding(
            "software-version",
            f"{env} {build['version']} is tagged +{tag}, but it is {kind} build",
            (*path, "version"),
            hint=f"set build: {'cuda' if _cuda(tag) else 'cpu'}, or tag the version for "
            f"{'CUDA (+cu121)' if cuda else 'the CPU (+cpu)'}",
        )
    elif index is not None and _cuda(index) != cuda:
        yield Finding(
            "software-index",
            f"{env} is {kind} build, but its index {build['index_url']} holds {index} wheels",
            (*path, "index_url"),
            hint="the index of the build's flavour, e.g. https://download.pytorch.org/whl/"
            + ("cu121" if cuda else "cpu"),
        )
    elif tag is not None and index is not None and tag != index:
        yield Finding(
            "software-index",
            f"{env} {build['version']} asks for {tag} wheels, but its index "
            f"{build['index_url']} holds {index} wheels: pip finds no such version there",
            (*path, "index_url"),
            hint=f"the index of the tag: https://download.pytorch.org/whl/{tag}, or the tag of "
            f"the index: +{index}",
        )


def _pip_build(env: str, build: Build, path: JsonPath) -> Iterator[Finding]:
    yield from _pip_flavours(env, build, path)
    if build.get("build") == "cuda":
        return
    wheels = [p for p in build.get("packages") or [] if catalog.is_cuda_wheel(p)]
    if wheels:
        yield Finding(
            "software-version",
            f"{env} is a CPU build, but {wheels[0]} exists only as a CUDA build",
            (*path, "packages", build["packages"].index(wheels[0])),
            hint="set build: cuda (for pools with NVIDIA GPUs), or drop the CUDA library",
        )


def _nvidia(plan: Plan, node: Node) -> bool:
    profile = (plan.get("hardware") or {}).get(node.hardware) or {}
    accel = profile.get("accelerators") or {}
    model = accel.get("model")
    entry = load_catalog().get(model, {}) if isinstance(model, str) else {}
    return entry.get("vendor") == "nvidia"


def _cuda_hosts(
    plan: Plan, env: str, build: Build, hosts: list[Node], path: JsonPath
) -> Iterator[Finding]:
    if build.get("build") != "cuda":
        return
    without = [node.name for node in hosts if not _nvidia(plan, node)]
    if without:
        yield Finding(
            "software-cuda-without-gpu",
            f"{env} {build.get('version')} is a CUDA build, but it goes to hosts without an "
            f"NVIDIA GPU ({first_names(without)}): it cannot run there",
            (*path, "build"),
            hint="give it only to pools with NVIDIA GPUs, and the others a cpu build",
        )


def _prefix(
    plan: Plan, env: str, build: Build, hosts: list[Node], path: JsonPath
) -> Iterator[Finding]:
    prefix = build.get("prefix")
    if build.get("source") != "pip" or not isinstance(prefix, str):
        return
    unseen = [node.name for node in hosts if not on_mount(prefix, host_mounts(plan, node))]
    if unseen:
        yield Finding(
            "software-prefix-not-mounted",
            f"{env}'s prefix {prefix} is on no shared file system that some of its hosts "
            f"mount ({first_names(unseen)}): they would not see what is installed there",
            (*path, "prefix"),
            hint=_mounts_hint(plan),
        )


def _mounts_hint(plan: Plan) -> str:
    storage: dict[str, Any] = plan.get("storage") or {}
    cephfs = (storage.get("ceph") or {}).get("cephfs") or {}
    places = [cephfs["mount"]] if cephfs.get("mount") else []
    places += [
        e["mount"] for e in (storage.get("nfs") or {}).get("exports") or [] if e.get("mount")
    ]
    if not places:
        return "the plan has no shared file system: add storage.ceph.cephfs or an NFS export"
    return (
        f"put it below a shared mount ({', '.join(places)}) its hosts have: the CephFS for its "
        "client roles, an NFS export for the hosts on the export's network"
    )


def _conflicts(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    """Two builds of one environment for one host: which one would it get?"""
    hosts: dict[tuple[str, int, int], list[str]] = {}
    for host, chosen in host_builds(plan, nodes).items():
        for env, indexes in chosen.items():
            for second in indexes[1:]:
                hosts.setdefault((env, indexes[0], second), []).append(host)
    for (env, first, second), names in hosts.items():
        yield Finding(
            "software-conflict",
            f"builds #{first} and #{second} of {env} both go to {first_names(names)}: a host "
            "gets one build of an environment",
            ("software", "environments", env, second),
            hint="give each pool one build of an environment",
        )

"""Every binary and image a Kubernetes release needs on an air-gapped site, and how each is
built from sources the Go module proxy serves. Pure: nothing here runs a tool.

The list, for the pinned patch release of the plan's minor (versions.BUNDLE_RELEASES):

- the seven Kubernetes binaries from `k8s.io/kubernetes`, with the version ldflags
  hack/lib/version.sh sets (kubeadm parses its own version; an unset one is v0.0.0);
- etcd, etcdctl and etcdutl at the etcd release that kubeadm's constants name;
- containerd 2, its runc shim and ctr; runc, static with libseccomp (cgo);
- the CNI plugins a plan's nodes need for a routed pod network (ptp, bridge, host-local,
  loopback, portmap);
- CoreDNS at the release kubeadm's constants name, with its default plugins;
- pause, compiled from build/pause/linux/pause.c of the Kubernetes module;
- the images `kubeadm config images list` names, each one layer the project writes.

crictl is not in it: kubeadm talks to the runtime over CRI itself since 1.31 and execs no
crictl.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from cluster_plan.kubernetes.bundle.project import (
    DEVICE_PLUGIN,
    PROJECT_REGISTRY,
    TRAINING,
    TRAINING_ENV,
    TRAINING_PROGRAM,
    BundleNeeds,
    LocalGoBuild,
    Rootfs,
    TrainingBuild,
    device_plugin_build,
    program_source,
    training_tag,
)
from cluster_plan.kubernetes.versions import (
    CNI_PLUGINS,
    CONTAINERD,
    RUNC,
    BundleRelease,
    bundle_release,
)

UPSTREAM_REGISTRY = "registry.k8s.io"
KUBERNETES_MODULE = "k8s.io/kubernetes"
KUBERNETES_COMMANDS = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kube-proxy",
    "kubelet",
    "kubeadm",
    "kubectl",
)
CNI_MODULE = "github.com/containernetworking/plugins"
CNI_PLUGIN_PACKAGES = (
    "main/ptp",
    "main/bridge",
    "main/loopback",
    "ipam/host-local",
    "meta/portmap",
)
CONTAINERD_MODULE = "github.com/containerd/containerd/v2"
ETCD_MODULES = ("server", "etcdctl", "etcdutl")
# What the images run from: the commands kubeadm writes in its static pods are bare names
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# {source_date}: the release's commit time from the module proxy, as upstream's
# SOURCE_DATE_EPOCH: fixed per version, so the same sources give the same bytes
SOURCE_DATE = "{source_date}"
# kube-proxy's iptables mode execs iptables(-save|-restore) and ip6tables(-save|-restore),
# its nftables mode and its start-up clean-up `nft`; the nf_tables backend of iptables, as
# Debian 12, Ubuntu 22.04 and RHEL 9 hosts use
IPTABLES_COMMANDS = (
    "iptables",
    "iptables-save",
    "iptables-restore",
    "ip6tables",
    "ip6tables-save",
    "ip6tables-restore",
)
KUBE_PROXY_HOST_FILES = ("/usr/sbin/nft", "/usr/sbin/xtables-nft-multi")
KUBE_PROXY_HOST_DIRS = ("/usr/lib/x86_64-linux-gnu/xtables",)


@dataclass(frozen=True)
class GoBuild:
    """One `go build` of main packages from the modules of one upstream project."""

    component: str
    modules: tuple[tuple[str, str], ...]  # (module path, version) the wrapper requires
    binaries: tuple[tuple[str, str], ...]  # (main package, binary name)
    directory: str = "bin"  # under the bundle
    cgo: bool = False
    tags: tuple[str, ...] = ()
    ldflags: tuple[str, ...] = ()  # besides -s -w -buildid=
    static: bool = False  # link a cgo binary statically: it runs on any node's libc

    def recipe(self) -> dict[str, Any]:
        return {
            "modules": [list(m) for m in self.modules],
            "binaries": [list(b) for b in self.binaries],
            "directory": self.directory,
            "cgo": self.cgo,
            "tags": list(self.tags),
            "ldflags": list(self.ldflags),
            "static": self.static,
        }


@dataclass(frozen=True)
class CBuild:
    """A C program compiled from a file of a module's sources (pause)."""

    component: str
    version: str
    module: tuple[str, str]
    source: str  # relative to the module's root
    binary: str
    cflags: tuple[str, ...]
    directory: str = "bin"

    def recipe(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "module": list(self.module),
            "source": self.source,
            "binary": self.binary,
            "cflags": list(self.cflags),
        }


@dataclass(frozen=True)
class Binary:
    name: str
    version: str
    component: str
    module: str  # module@version of its sources
    source: str  # the module, or for pause the file in it
    path: str  # relative to the bundle


@dataclass(frozen=True)
class Image:
    """One image written by the project, one layer: those kubeadm pulls (the binaries at the
    paths of the upstream image, and for kube-proxy the netfilter tools it execs), and the
    project's own (the device plugin; the training image, a Debian root file system with the
    training program)."""

    name: str
    repository: str  # under the registry
    tag: str
    version: str
    files: tuple[tuple[str, str], ...]  # (path in the image, bundle binary)
    entrypoint: tuple[str, ...]
    user: str = ""
    host_files: tuple[str, ...] = ()  # from this machine, with their libraries
    host_dirs: tuple[str, ...] = ()
    links: tuple[tuple[str, str], ...] = ()  # (path in the image, target)
    registry: str = UPSTREAM_REGISTRY
    rootfs: Rootfs | None = None  # a Debian root file system under the files
    program: str = ""  # where the project's training program goes in it
    env: tuple[str, ...] = ()  # besides PATH

    @property
    def reference(self) -> str:
        """The reference kubeadm asks for without an image repository of its own; for the
        project's images, the name a site imports them under."""
        return f"{self.registry}/{self.repository}:{self.tag}"

    @property
    def kubeadm(self) -> bool:
        """One of the images kubeadm lists."""
        return self.registry == UPSTREAM_REGISTRY

    @property
    def mirror_path(self) -> str:
        """Name and tag under the repository kubeadm is given (`imageRepository`): kubeadm
        drops CoreDNS's `coredns/` there."""
        return f"{self.repository.rsplit('/', 1)[-1]}:{self.tag}"

    def mirror_reference(self, repository: str) -> str:
        return f"{repository.rstrip('/')}/{self.mirror_path}"

    def recipe(self) -> dict[str, Any]:
        recipe: dict[str, Any] = {
            "reference": self.reference,
            "files": [list(f) for f in self.files],
            "entrypoint": list(self.entrypoint),
            "user": self.user,
            "host_files": list(self.host_files),
            "host_dirs": list(self.host_dirs),
            "links": [list(link) for link in self.links],
        }
        # only where set: the recipe of the other images, and so the key, is as it was
        if self.rootfs is not None:
            recipe["rootfs"] = self.rootfs.recipe()
        if self.program:
            recipe["program"] = [self.program, program_source()]
        if self.env:
            recipe["env"] = list(self.env)
        return recipe


@dataclass(frozen=True)
class BundleSpec:
    """What to build for one plan version, and how."""

    plan_version: str
    release: BundleRelease
    go_builds: tuple[GoBuild, ...]
    c_builds: tuple[CBuild, ...]
    images: tuple[Image, ...]
    binaries: tuple[Binary, ...] = field(default=())
    local_builds: tuple[LocalGoBuild, ...] = ()  # the project's own programs
    needs: BundleNeeds = field(default_factory=BundleNeeds)

    @property
    def kubernetes(self) -> str:
        return self.release.kubernetes

    def binary(self, name: str) -> Binary:
        for binary in self.binaries:
            if binary.name == name:
                return binary
        raise KeyError(f"no binary {name!r} in the Kubernetes {self.kubernetes} bundle")

    def image(self, name: str) -> Image:
        for image in self.images:
            if image.name == name:
                return image
        raise KeyError(f"no image {name!r} in the Kubernetes {self.kubernetes} bundle")

    def recipe(self) -> dict[str, Any]:
        """Everything that decides the bundle's bytes, except the tools (cache.py adds
        those)."""
        recipe = {
            "kubernetes": self.kubernetes,
            "release": self.release.recipe(),
            "go": {b.component: b.recipe() for b in self.go_builds},
            "c": {b.component: b.recipe() for b in self.c_builds},
            "images": {i.name: i.recipe() for i in self.images},
        }
        if self.local_builds:  # a plan without needs keeps the key it had before them
            recipe["local"] = {b.component: b.recipe() for b in self.local_builds}
        return recipe


def _kubernetes_ldflags(version: str) -> tuple[str, ...]:
    """hack/lib/version.sh's, for both packages that carry the version. The module proxy
    knows no commit, so gitCommit stays empty and the tree state says "archive" (built from
    an export of the tree), as version.sh does for `git archive` sources."""
    major, minor, _ = version.split(".")
    values = {
        "gitVersion": f"v{version}",
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "archive",
        "buildDate": SOURCE_DATE,
    }
    return tuple(
        f"-X {package}.{key}={value}"
        for package in ("k8s.io/client-go/pkg/version", "k8s.io/component-base/version")
        for key, value in values.items()
    )


def _go_builds(release: BundleRelease) -> tuple[GoBuild, ...]:
    k8s = f"v{release.kubernetes}"
    etcd = f"v{release.etcd}"
    return (
        GoBuild(
            "kubernetes",
            ((KUBERNETES_MODULE, k8s),),
            tuple((f"{KUBERNETES_MODULE}/cmd/{c}", c) for c in KUBERNETES_COMMANDS),
            ldflags=_kubernetes_ldflags(release.kubernetes),
        ),
        GoBuild(
            "etcd",
            tuple((f"go.etcd.io/etcd/{m}/v3", etcd) for m in ETCD_MODULES),
            (
                ("go.etcd.io/etcd/server/v3", "etcd"),
                ("go.etcd.io/etcd/etcdctl/v3", "etcdctl"),
                ("go.etcd.io/etcd/etcdutl/v3", "etcdutl"),
            ),
        ),
        GoBuild(
            "containerd",
            ((CONTAINERD_MODULE, f"v{CONTAINERD}"),),
            tuple(
                (f"{CONTAINERD_MODULE}/cmd/{c}", c)
                for c in ("containerd", "containerd-shim-runc-v2", "ctr")
            ),
            # btrfs needs its C headers; the snapshotters the nodes use are overlayfs and native
            tags=("no_btrfs", "urfave_cli_no_docs"),
            ldflags=(
                f"-X {CONTAINERD_MODULE}/version.Version=v{CONTAINERD}",
                f"-X {CONTAINERD_MODULE}/version.Package={CONTAINERD_MODULE}",
            ),
        ),
        GoBuild(
            "runc",
            (("github.com/opencontainers/runc", f"v{RUNC}"),),
            (("github.com/opencontainers/runc", "runc"),),
            cgo=True,  # its nsenter is C
            tags=("seccomp", "urfave_cli_no_docs", "netgo", "osusergo"),
            ldflags=(f"-X main.version={RUNC}",),
            static=True,
        ),
        GoBuild(
            "cni-plugins",
            ((CNI_MODULE, f"v{CNI_PLUGINS}"),),
            tuple((f"{CNI_MODULE}/plugins/{p}", p.rsplit("/", 1)[-1]) for p in CNI_PLUGIN_PACKAGES),
            directory="cni/bin",
            ldflags=(f"-X {CNI_MODULE}/pkg/utils/buildversion.BuildVersion=v{CNI_PLUGINS}",),
        ),
        GoBuild(
            "coredns",
            (("github.com/coredns/coredns", release.coredns),),
            (("github.com/coredns/coredns", "coredns"),),
        ),
    )


def _c_builds(release: BundleRelease) -> tuple[CBuild, ...]:
    k8s = f"v{release.kubernetes}"
    # build/pause/Makefile's CFLAGS; -s for its strip
    return (
        CBuild(
            "pause",
            release.pause,
            (KUBERNETES_MODULE, k8s),
            "build/pause/linux/pause.c",
            "pause",
            ("-Os", "-Wall", "-Werror", "-static", "-s", f"-DVERSION=v{release.pause}-{k8s}"),
        ),
    )


def binaries_of(go_builds: tuple[GoBuild, ...], c_builds: tuple[CBuild, ...]) -> tuple[Binary, ...]:
    out = [
        Binary(
            name,
            version,
            b.component,
            f"{module}@{version}",
            f"{module}@{version}",
            f"{b.directory}/{name}",
        )
        for b in go_builds
        for (_package, name), (module, version) in zip(b.binaries, _module_of_each(b), strict=True)
    ]
    out += [
        Binary(
            c.binary,
            c.version,
            c.component,
            f"{c.module[0]}@{c.module[1]}",
            f"{c.module[0]}@{c.module[1]}/{c.source}",
            f"{c.directory}/{c.binary}",
        )
        for c in c_builds
    ]
    return tuple(out)


def _module_of_each(build: GoBuild) -> list[tuple[str, str]]:
    """The module each main package of ``build`` is in: the longest module path prefix."""
    out = []
    for package, _name in build.binaries:
        owners = [m for m in build.modules if package == m[0] or package.startswith(m[0] + "/")]
        out.append(max(owners, key=lambda m: len(m[0])))
    return out


def _images(release: BundleRelease) -> tuple[Image, ...]:
    k8s = f"v{release.kubernetes}"

    def control_plane(name: str) -> Image:
        path = f"usr/local/bin/{name}"
        return Image(name, name, k8s, k8s, ((path, name),), (f"/{path}",))

    proxy = control_plane("kube-proxy")
    return (
        control_plane("kube-apiserver"),
        control_plane("kube-controller-manager"),
        control_plane("kube-scheduler"),
        Image(
            proxy.name,
            proxy.repository,
            proxy.tag,
            proxy.version,
            proxy.files,
            proxy.entrypoint,
            host_files=KUBE_PROXY_HOST_FILES,
            host_dirs=KUBE_PROXY_HOST_DIRS,
            links=tuple((f"usr/sbin/{c}", "xtables-nft-multi") for c in IPTABLES_COMMANDS),
        ),
        # upstream: /coredns, run by its ENTRYPOINT (kubeadm's Deployment gives only args)
        Image(
            "coredns",
            "coredns/coredns",
            release.coredns,
            release.coredns,
            (("coredns", "coredns"),),
            ("/coredns",),
        ),
        # upstream: /pause as 65535, which containerd runs as the sandbox
        Image(
            "pause",
            "pause",
            release.pause,
            release.pause,
            (("pause", "pause"),),
            ("/pause",),
            user="65535:65535",
        ),
        Image(
            "etcd",
            "etcd",
            release.etcd_image_tag,
            f"v{release.etcd}",
            tuple((f"usr/local/bin/{n}", n) for n in ("etcd", "etcdctl", "etcdutl")),
            ("/usr/local/bin/etcd",),
        ),
    )


def device_plugin_image(build: LocalGoBuild | None = None) -> Image:
    """The device plugin's image: its static binary alone, run as the DaemonSet's command."""
    build = build or device_plugin_build()
    path = f"usr/local/bin/{build.binary}"
    return Image(
        DEVICE_PLUGIN,
        DEVICE_PLUGIN,
        build.version,
        build.version,
        ((path, build.binary),),
        (f"/{path}",),
        registry=PROJECT_REGISTRY,
    )


def training_image(build: TrainingBuild) -> Image:
    """The training image: Debian with the build's packages, and the training program."""
    return Image(
        TRAINING,
        TRAINING,
        training_tag(build),
        build.version,
        (),
        ("/usr/bin/python3",),
        registry=PROJECT_REGISTRY,
        rootfs=Rootfs(build.packages),
        program=TRAINING_PROGRAM,
        env=TRAINING_ENV,
    )


def _local_binaries(builds: tuple[LocalGoBuild, ...]) -> tuple[Binary, ...]:
    return tuple(
        Binary(
            b.binary,
            b.version,
            b.component,
            f"{b.module}@{b.version}",
            f"{b.module}@{b.version}",
            f"{b.directory}/{b.binary}",
        )
        for b in builds
    )


def bundle_spec(plan_version: str, needs: BundleNeeds | None = None) -> BundleSpec:
    """The bundle for a plan's `scheduler.kubernetes.version` ("1.36" or "1.36.3") and what
    else the plan needs of it (`render(expanded).bundle_needs`); versions.UnsupportedVersion
    when no release of that minor is pinned."""
    needs = needs or BundleNeeds()
    release = bundle_release(plan_version)
    go_builds = _go_builds(release)
    c_builds = _c_builds(release)
    local = (device_plugin_build(),) if needs.device_plugin else ()
    images = _images(release) + tuple(device_plugin_image(b) for b in local)
    if needs.training is not None:
        images += (training_image(needs.training),)
    return BundleSpec(
        plan_version=str(plan_version),
        release=release,
        go_builds=go_builds,
        c_builds=c_builds,
        images=images,
        binaries=binaries_of(go_builds, c_builds) + _local_binaries(local),
        local_builds=local,
        needs=needs,
    )


_KUBEADM_PINS = {
    "etcd_image_tag": re.compile(r'^\s*DefaultEtcdVersion\s*=\s*"([^"]+)"', re.M),
    "coredns": re.compile(r'^\s*CoreDNSVersion\s*=\s*"([^"]+)"', re.M),
    "pause": re.compile(r'^\s*PauseVersion\s*=\s*"([^"]+)"', re.M),
}
_PAUSE_TAG = re.compile(r"^TAG \?= (\S+)$", re.M)


def kubeadm_pins(constants: str, pause_makefile: str) -> dict[str, str]:
    """What kubeadm asks for, from cmd/kubeadm/app/constants/constants.go, and the version
    build/pause/Makefile gives the pause it builds."""
    found = {}
    for name, pattern in _KUBEADM_PINS.items():
        match = pattern.search(constants)
        found[name] = match.group(1) if match else "(not found)"
    tag = _PAUSE_TAG.search(pause_makefile)
    found["pause_source"] = tag.group(1) if tag else "(not found)"
    return found


def pin_problems(release: BundleRelease, pins: dict[str, str]) -> list[str]:
    """Where versions.BUNDLE_RELEASES differs from the Kubernetes sources."""
    expected = {
        "etcd_image_tag": release.etcd_image_tag,
        "coredns": release.coredns,
        "pause": release.pause,
        "pause_source": release.pause,
    }
    return [
        f"{name}: pinned {want}, Kubernetes {release.kubernetes}'s sources say {pins.get(name)}"
        for name, want in expected.items()
        if pins.get(name) != want
    ]

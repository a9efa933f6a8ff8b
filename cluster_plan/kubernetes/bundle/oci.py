"""OCI images written by the project: one layer, an image config, a manifest, in an OCI image
layout (oci-layout, index.json, blobs/sha256/) that skopeo copies to a registry and
`ctr images import` reads.

The same entries give the same bytes, so the same digests: entries sorted, every parent
directory present, owners as numbers without names (0:0 unless an entry says otherwise), one
fixed time for every mtime and for the config's `created`, JSON with sorted keys and no
spaces. The layer is an uncompressed tar:
gzip's output depends on the zlib that wrote it, the tar's only on its entries.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

INDEX = "application/vnd.oci.image.index.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar"
LAYOUT_VERSION = "1.0.0"
# containerd names an imported image from this annotation; skopeo's `oci:DIR:TAG` reads ref.name
CONTAINERD_NAME = "io.containerd.image.name"
REF_NAME = "org.opencontainers.image.ref.name"
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Entry:
    """One thing in the layer: a file (its bytes from ``source``), a directory, a symlink, or a
    hard link to a file before it (``target``: its path in the image)."""

    path: str  # relative to the image's root: "usr/local/bin/kube-apiserver"
    kind: str  # "file" | "dir" | "symlink" | "hardlink"
    mode: int = 0o755
    source: Path | None = None
    target: str = ""
    uid: int = 0
    gid: int = 0


@dataclass(frozen=True)
class ImageConfig:
    entrypoint: tuple[str, ...]
    env: tuple[str, ...]
    user: str = ""
    architecture: str = "amd64"


@dataclass(frozen=True)
class Written:
    """What write_layout made: the manifest's digest (what a registry and the CRI report)
    and the bytes of every blob."""

    manifest_digest: str  # "sha256:..."
    manifest_size: int
    size: int


def _canonical(document: Any) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def rfc3339(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def with_parents(entries: Iterable[Entry]) -> list[Entry]:
    """The entries, sorted by path, with a directory entry (0755) for every parent that has
    none. Two entries for one path are an error: the layer would depend on their order."""
    by_path: dict[str, Entry] = {}
    for entry in entries:
        path = entry.path.strip("/")
        if path in by_path:
            raise ValueError(f"two entries for /{path} in one image")
        by_path[path] = replace(entry, path=path)
    for path in list(by_path):
        parent = os.path.dirname(path)
        while parent and parent not in by_path:
            by_path[parent] = Entry(parent, "dir", 0o755)
            parent = os.path.dirname(parent)
    return [by_path[p] for p in sorted(by_path)]


class _Digesting(io.RawIOBase):
    """A writable file that hashes and counts what passes through it."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self.sha = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def tell(self) -> int:  # tarfile asks where it starts
        return self.size

    def write(self, data: Any) -> int:
        view = bytes(data)
        self.sha.update(view)
        self.size += len(view)
        self.out.write(view)
        return len(view)


def _tar_info(entry: Entry, mtime: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(entry.path + ("/" if entry.kind == "dir" else ""))
    info.mtime = mtime
    info.mode = entry.mode
    info.uid, info.gid = entry.uid, entry.gid
    info.uname = info.gname = ""
    if entry.kind == "dir":
        info.type = tarfile.DIRTYPE
    elif entry.kind == "symlink":
        info.type = tarfile.SYMTYPE
        info.linkname = entry.target
    elif entry.kind == "hardlink":
        info.type = tarfile.LNKTYPE
        info.linkname = entry.target.strip("/")
    elif entry.kind == "file" and entry.source is not None:
        info.size = entry.source.stat().st_size
    else:
        raise ValueError(f"/{entry.path}: {entry.kind} without a source")
    return info


def write_layer(entries: Sequence[Entry], out: BinaryIO, mtime: int) -> tuple[str, int]:
    """The layer as a tar on ``out``; returns its sha256 (hex) and size."""
    digesting = _Digesting(out)
    files: set[str] = set()
    with tarfile.open(fileobj=digesting, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for entry in with_parents(entries):
            if entry.kind == "hardlink" and entry.target.strip("/") not in files:
                target = entry.target.strip("/")
                raise ValueError(f"/{entry.path}: a hard link to /{target}, no file before it")
            if entry.kind == "file":
                files.add(entry.path)
            info = _tar_info(entry, mtime)
            if entry.kind == "file" and entry.source is not None:
                with entry.source.open("rb") as data:
                    tar.addfile(info, data)
            else:
                tar.addfile(info)
    return digesting.sha.hexdigest(), digesting.size


def _put_blob(blobs: Path, data: bytes) -> dict[str, Any]:
    digest = hashlib.sha256(data).hexdigest()
    (blobs / digest).write_bytes(data)
    return {"digest": f"sha256:{digest}", "size": len(data)}


def write_layout(
    directory: Path,
    entries: Sequence[Entry],
    config: ImageConfig,
    *,
    reference: str,
    tag: str,
    epoch: int,
) -> Written:
    """Write the image as an OCI image layout in ``directory`` (which must not exist)."""
    blobs = directory / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    partial = blobs / ".layer.partial"
    with partial.open("wb") as out:
        layer_digest, layer_size = write_layer(entries, out, epoch)
    partial.rename(blobs / layer_digest)
    created = rfc3339(epoch)
    image_config: dict[str, Any] = {
        "created": created,
        "architecture": config.architecture,
        "os": "linux",
        "config": {"Env": list(config.env), "Entrypoint": list(config.entrypoint)},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_digest}"]},
        "history": [{"created": created, "created_by": "cluster-plan k8s bundle"}],
    }
    if config.user:
        image_config["config"]["User"] = config.user
    config_blob = _put_blob(blobs, _canonical(image_config))
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": {"mediaType": CONFIG, **config_blob},
        "layers": [{"mediaType": LAYER, "digest": f"sha256:{layer_digest}", "size": layer_size}],
    }
    manifest_blob = _put_blob(blobs, _canonical(manifest))
    index = {
        "schemaVersion": 2,
        "mediaType": INDEX,
        "manifests": [
            {
                "mediaType": MANIFEST,
                **manifest_blob,
                "platform": {"architecture": config.architecture, "os": "linux"},
                "annotations": {CONTAINERD_NAME: reference, REF_NAME: tag},
            }
        ],
    }
    (directory / "index.json").write_bytes(_canonical(index))
    (directory / "oci-layout").write_bytes(_canonical({"imageLayoutVersion": LAYOUT_VERSION}))
    return Written(
        manifest_digest=str(manifest_blob["digest"]),
        manifest_size=int(manifest_blob["size"]),
        size=layer_size + int(config_blob["size"]) + int(manifest_blob["size"]),
    )


def file_sha256(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as data:
        while chunk := data.read(_CHUNK):
            sha.update(chunk)
    return sha.hexdigest()


def _blob_problems(directory: Path, descriptor: dict[str, Any], want: str) -> list[str]:
    digest = str(descriptor.get("digest", ""))
    if descriptor.get("mediaType") != want:
        return [f"{directory}: {digest} has media type {descriptor.get('mediaType')}, not {want}"]
    if not digest.startswith("sha256:"):
        return [f"{directory}: {digest!r} is not a sha256 digest"]
    blob = directory / "blobs" / "sha256" / digest.removeprefix("sha256:")
    if not blob.is_file():
        return [f"{directory}: blob {digest} is missing"]
    problems = []
    if blob.stat().st_size != descriptor.get("size"):
        problems.append(
            f"{blob}: {blob.stat().st_size} bytes, the descriptor says {descriptor.get('size')}"
        )
    if f"sha256:{file_sha256(blob)}" != digest:
        problems.append(f"{blob}: its content does not have the digest {digest}")
    return problems


def layout_problems(directory: Path) -> list[str]:
    """What is wrong with an OCI image layout of one single-layer-or-more image: the files,
    every descriptor's media type, size and digest against the blob's content."""
    try:
        layout = json.loads((directory / "oci-layout").read_bytes())
        index = json.loads((directory / "index.json").read_bytes())
    except (OSError, ValueError) as exc:
        return [f"{directory}: not an OCI image layout: {exc}"]
    problems = []
    if layout.get("imageLayoutVersion") != LAYOUT_VERSION:
        problems.append(f"{directory}/oci-layout: imageLayoutVersion is not {LAYOUT_VERSION}")
    if index.get("schemaVersion") != 2 or index.get("mediaType") != INDEX:
        problems.append(f"{directory}/index.json: not an OCI image index")
    for descriptor in index.get("manifests") or []:
        found = _blob_problems(directory, descriptor, MANIFEST)
        problems += found
        if found:
            continue
        blob = directory / "blobs" / "sha256" / str(descriptor["digest"]).removeprefix("sha256:")
        manifest = json.loads(blob.read_bytes())
        problems += _blob_problems(directory, manifest.get("config") or {}, CONFIG)
        for layer in manifest.get("layers") or []:
            problems += _blob_problems(directory, layer, LAYER)
    return problems

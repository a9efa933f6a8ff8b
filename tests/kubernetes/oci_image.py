"""Build an OCI image archive from the node's own busybox: the lab's nodes reach no public
registry, so the test image is made on the mirror host, which then serves it from the plan's
mirror (tests/kubernetes/test_kubernetes_lab.py). Run inside a node:

    python3 - OUT.tar < oci_image.py

The archive is an OCI image layout (oci-layout, index.json, blobs) with one gzip layer
holding /bin/busybox and a few applet links, named lab.local/busybox:1.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import sys
import tarfile

REFERENCE = "lab.local/busybox:1"
APPLETS = ("sh", "echo", "cat", "id", "hostname")


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _blob(tar: tarfile.TarFile, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    _add(tar, f"blobs/sha256/{digest}", data)
    return digest


def _layer() -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as layer:
        folder = tarfile.TarInfo("bin")
        folder.type, folder.mode = tarfile.DIRTYPE, 0o755
        layer.addfile(folder)
        layer.add("/bin/busybox", arcname="bin/busybox")
        for applet in APPLETS:
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname = tarfile.SYMTYPE, "busybox"
            layer.addfile(link)
    return raw.getvalue()


def build(path: str) -> None:
    raw = _layer()
    packed = gzip.compress(raw, mtime=0)
    with tarfile.open(path, "w") as tar:
        layer = _blob(tar, packed)
        config = json.dumps(
            {
                "architecture": "amd64",
                "os": "linux",
                "config": {"Cmd": ["/bin/sh"]},
                "rootfs": {
                    "type": "layers",
                    "diff_ids": ["sha256:" + hashlib.sha256(raw).hexdigest()],
                },
            }
        ).encode()
        config_digest = _blob(tar, config)
        manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {
                    "mediaType": "application/vnd.oci.image.config.v1+json",
                    "digest": f"sha256:{config_digest}",
                    "size": len(config),
                },
                "layers": [
                    {
                        "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                        "digest": f"sha256:{layer}",
                        "size": len(packed),
                    }
                ],
            }
        ).encode()
        manifest_digest = _blob(tar, manifest)
        index = {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": f"sha256:{manifest_digest}",
                    "size": len(manifest),
                    "annotations": {"org.opencontainers.image.ref.name": REFERENCE},
                }
            ],
        }
        _add(tar, "oci-layout", b'{"imageLayoutVersion": "1.0.0"}')
        _add(tar, "index.json", json.dumps(index).encode())


if __name__ == "__main__":
    build(sys.argv[1])

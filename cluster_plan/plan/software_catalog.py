"""What the software sources can give: the versions validate holds a plan's builds to.

Debian: the candidates of Debian 12 (bookworm) main, read with `apt-cache policy` on a Debian
12.11 machine in December 2026 (the upstream version, without the Debian revision). Debian's
torch is a CPU build (libtorch1.13 links gloo and tensorpipe, not CUDA or NCCL); a Debian
source can give nothing else. pip: the PyPI projects that are CUDA builds whatever version is
asked (NVIDIA's CUDA libraries, one project per CUDA major version); versions of PyPI
projects are not held to a list, since the index keeps every release.
"""

from __future__ import annotations

from typing import Final

# The cluster.os whose packages the catalog knows, and that release's name.
DEBIAN_OS: Final = "debian-12"
DEBIAN_RELEASE: Final = "bookworm"

# Debian 12 (bookworm) main: package -> upstream version of its candidate.
DEBIAN_PACKAGES: Final[dict[str, str]] = {
    "python3-torch": "1.13.1",
    "libtorch-dev": "1.13.1",
    "openmpi-bin": "4.1.4",
    "libopenmpi-dev": "4.1.4",
    "mpich": "4.0.2",
    "python3-mpi4py": "3.1.4",
    "libpmix2": "4.2.2",
    "lmod": "8.6.19",
}

# PyPI projects that exist only as CUDA builds.
CUDA_WHEELS: Final = frozenset(
    {
        "nvidia-nccl-cu12",
        "nvidia-nccl-cu13",
        "nvidia-cuda-runtime-cu12",
        "nvidia-cublas-cu12",
        "nvidia-cudnn-cu12",
    }
)


def debian_version(package: str) -> str | None:
    """The version Debian 12 gives ``package``, None when the catalog does not know it."""
    return DEBIAN_PACKAGES.get(package)


def version_matches(asked: str, given: str) -> bool:
    """Whether a plan's version names the version a source gives: equal, or its leading
    components (1.13 names 1.13.1; 1.1 does not)."""
    asked_parts = asked.split("+", 1)[0].split(".")
    return given.split(".")[: len(asked_parts)] == asked_parts


def is_cuda_wheel(package: str) -> bool:
    """Whether a PyPI project is a CUDA build whatever its version (names compared as pip
    does: case and '-', '_', '.' folded)."""
    folded = package.lower().replace("_", "-").replace(".", "-")
    return folded in CUDA_WHEELS


# What gives a pool a collectives backend (docs/collectives.md): torch (gloo, NCCL) or mpi4py.
TORCH_PACKAGES: Final = frozenset({"python3-torch", "torch"})
MPI_PACKAGES: Final = frozenset({"python3-mpi4py", "mpi4py"})

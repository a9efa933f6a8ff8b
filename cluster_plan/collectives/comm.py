"""The ranks of one job and the operations the node program needs from them, over torch's
process groups (gloo on CPUs, NCCL on NVIDIA GPUs) or MPI (mpi4py). Imported on the nodes;
torch and mpi4py are imported when a backend is chosen, so a node without them gets a clear
message instead of an ImportError at start."""

from __future__ import annotations

import fcntl
import ipaddress
import os
import socket
import struct
from datetime import timedelta
from typing import Any, Protocol


class ProgramError(Exception):
    """A clear message for the user; the program exits 1 with it."""


def rank_env(env: dict[str, str] | None = None) -> tuple[int, int, int]:
    """(rank, world size, local rank): torchrun's variables, else srun's, else one rank."""
    env = dict(os.environ) if env is None else env
    if "RANK" in env and "WORLD_SIZE" in env:
        return int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", "0"))
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        return (
            int(env["SLURM_PROCID"]),
            int(env["SLURM_NTASKS"]),
            int(env.get("SLURM_LOCALID", "0")),
        )
    return 0, 1, 0


SIOCGIFADDR = 0x8915  # Linux: an interface's IPv4 address


def interface_address(name: str) -> str | None:
    """The interface's IPv4 address, None when it has none."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            packed = fcntl.ioctl(
                sock.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15])
            )
        except OSError:
            return None
    return socket.inet_ntoa(packed[20:24])


def interface_on(cidr: str) -> str:
    """The name of this host's interface on the network `cidr` (the plan's job network): the
    names differ between hardware profiles, the network does not."""
    network = ipaddress.ip_network(cidr, strict=False)
    for _, name in socket.if_nameindex():
        address = interface_address(name)
        if address and ipaddress.ip_address(address) in network:
            return name
    raise ProgramError(f"{socket.gethostname()}: no interface on the job network {cidr}")


def use_network(cidr: str | None) -> None:
    """Keep gloo's and NCCL's sockets on the job network (their own variables win)."""
    if not cidr:
        return
    name = interface_on(cidr)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", name)
    os.environ.setdefault("NCCL_SOCKET_IFNAME", name)


class Communicator(Protocol):
    rank: int
    world: int

    def buffer(self, elements: int, value: float) -> Any: ...
    def allreduce(self, buffer: Any) -> None: ...
    def check(self, buffer: Any, expected: float) -> bool: ...
    def sync(self) -> None: ...
    def barrier(self) -> None: ...
    def maximum(self, value: float) -> float: ...
    def gather(self, value: Any) -> list[Any]: ...
    def close(self) -> None: ...


def _import(module: str, package: str) -> Any:
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as exc:
        raise ProgramError(
            f"{socket.gethostname()}: {module} is not installed here ({exc}); the plan's "
            f"software section gives it with {package} (docs/software.md)"
        ) from None


class TorchCommunicator:
    """torch.distributed: gloo (CPU tensors) or nccl (one GPU per local rank)."""

    def __init__(self, backend: str, init_method: str, timeout_s: float) -> None:
        self.torch = _import("torch", "a pytorch build")
        self.dist = _import("torch.distributed", "a pytorch build")
        self.rank, self.world, local = rank_env()
        self.device = "cpu"
        if backend == "nccl":
            if not self.torch.cuda.is_available():
                raise ProgramError(
                    f"{socket.gethostname()}: nccl needs CUDA, which torch here lacks"
                )
            self.device = f"cuda:{local}"
            self.torch.cuda.set_device(local)
        self.dist.init_process_group(
            backend,
            init_method=init_method,
            rank=self.rank,
            world_size=self.world,
            timeout=timedelta(seconds=timeout_s),
        )

    def buffer(self, elements: int, value: float) -> Any:
        return self.torch.full((elements,), value, dtype=self.torch.float32, device=self.device)

    def allreduce(self, buffer: Any) -> None:
        self.dist.all_reduce(buffer)

    def check(self, buffer: Any, expected: float) -> bool:
        return bool(self.torch.all(buffer == expected).item())

    def sync(self) -> None:
        if self.device != "cpu":
            self.torch.cuda.synchronize()

    def barrier(self) -> None:
        self.dist.barrier()

    def maximum(self, value: float) -> float:
        t = self.torch.tensor([value], dtype=self.torch.float64, device=self.device)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return float(t.item())

    def gather(self, value: Any) -> list[Any]:
        out: list[Any] = [None] * self.world
        self.dist.all_gather_object(out, value)
        return out

    def close(self) -> None:
        self.dist.destroy_process_group()


class MpiCommunicator:
    """MPI through mpi4py, started by srun --mpi=pmix (or mpirun)."""

    def __init__(self) -> None:
        self.np = _import("numpy", "python3-numpy")
        self.mpi = _import("mpi4py.MPI", "an mpi build with python3-mpi4py")
        self.comm = self.mpi.COMM_WORLD
        self.rank, self.world = self.comm.Get_rank(), self.comm.Get_size()

    def buffer(self, elements: int, value: float) -> Any:
        return self.np.full(elements, value, dtype=self.np.float32)

    def allreduce(self, buffer: Any) -> None:
        self.comm.Allreduce(self.mpi.IN_PLACE, buffer, op=self.mpi.SUM)

    def check(self, buffer: Any, expected: float) -> bool:
        return bool((buffer == expected).all())

    def sync(self) -> None:
        return None

    def barrier(self) -> None:
        self.comm.Barrier()

    def maximum(self, value: float) -> float:
        return float(self.comm.allreduce(value, op=self.mpi.MAX))

    def gather(self, value: Any) -> list[Any]:
        return list(self.comm.allgather(value))

    def close(self) -> None:
        return None


def communicator(backend: str, init_method: str, timeout_s: float) -> Communicator:
    if backend == "mpi":
        return MpiCommunicator()
    return TorchCommunicator(backend, init_method, timeout_s)

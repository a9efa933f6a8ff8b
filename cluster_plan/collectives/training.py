"""A small distributed training job with DistributedDataParallel: the proof that a cluster
trains across nodes. Every rank trains the same model on its own shard of a synthetic
regression task for a fixed number of steps; the job passes when the loss went down and every
rank ends with the same weights (DDP averaged the gradients, so the replicas never drifted).
Started by torchrun (its RANK, WORLD_SIZE, MASTER_ADDR...), gloo on CPUs, NCCL on GPUs."""

from __future__ import annotations

import hashlib
import socket
from typing import Any

from cluster_plan.collectives.comm import TorchCommunicator

FEATURES = 32


def _weights_digest(torch: Any, model: Any) -> str:
    flat = torch.cat([p.detach().to("cpu").reshape(-1) for p in model.parameters()])
    return hashlib.sha256(flat.numpy().tobytes()).hexdigest()


def train(comm: TorchCommunicator, steps: int, batch: int, lr: float) -> dict[str, Any]:
    torch = comm.torch
    nn = torch.nn
    torch.manual_seed(0)  # the same starting weights and target on every rank
    truth = torch.randn(FEATURES, 1)
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, 1)).to(comm.device)
    ddp = nn.parallel.DistributedDataParallel(model)
    optimiser = torch.optim.SGD(ddp.parameters(), lr=lr)
    data = torch.Generator().manual_seed(1000 + comm.rank)  # each rank its own shard
    losses = []
    for _ in range(steps):
        x = torch.randn(batch, FEATURES, generator=data)
        y = x @ truth + 0.01 * torch.randn(batch, 1, generator=data)
        optimiser.zero_grad()
        loss = nn.functional.mse_loss(ddp(x.to(comm.device)), y.to(comm.device))
        loss.backward()  # DDP all-reduces the gradients here
        optimiser.step()
        mean = loss.detach().clone()
        comm.dist.all_reduce(mean)
        losses.append(round(float(mean.item()) / comm.world, 6))
    digests = comm.gather(_weights_digest(torch, model))
    return {
        "ranks": comm.world,
        "hosts": comm.gather(socket.gethostname()),
        "steps": steps,
        "losses": losses,
        "first_loss": losses[0] if losses else None,
        "last_loss": losses[-1] if losses else None,
        "weights_sha256": digests,
        "identical_weights": len(set(digests)) == 1,
        "loss_went_down": bool(losses) and losses[-1] < losses[0],
    }

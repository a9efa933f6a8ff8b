"""Collectives and a distributed training job on the cluster's nodes: the node
program (all-reduce sweeps with gloo, MPI or NCCL; a DistributedDataParallel job) and the
figures nccl-tests defines. Standard library only at import time: torch and mpi4py are
imported by the backend that needs them, on the node."""

"""Exporters this project writes: node_exporter textfile collectors for what Debian's
exporters do not cover (GPUs through NVML, Slurm, and the project's own state).

Each collector is a pure core (readings in, metric families out) behind a thin shell that
reads NVML, runs a Slurm command or opens the project's files, and a writer that replaces its
`*.prom` file atomically (docs/monitoring-exporters.md).
"""

"""The plan core: read, check, allocate, lock and expand a cluster plan (docs/ARCHITECTURE.md)."""

"""Backups as the cluster sees them: `cluster-plan backup status` over every node."""

"""The plan's networks as the hosts enforce them: `firewall` decides which services the
nftables firewall confines to which of the plan's networks (plugins/filter/common_firewall.py
only adapts it for the common role)."""

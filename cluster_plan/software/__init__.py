"""The software environments on the hosts: what the software role installs from each host's
builds (plan_host.software, chosen by cluster_plan.plan.software)."""

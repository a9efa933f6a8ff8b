"""Monitoring from the plan: Prometheus' scrape configuration and file_sd targets, the alert
rules with thresholds the plan knows, and Alertmanager's routes (docs/monitoring.md).

Pure: an expanded plan in, file contents out; `command` is the CLI's thin shell."""

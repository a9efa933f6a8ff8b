"""Monitoring from the plan: the metrics table (metrics), Prometheus' scrape configuration and
file_sd targets, the alert rules with thresholds the plan knows and their runbooks,
Alertmanager's routes, the Grafana dashboards (panels, grafana, dashboards), and the status
page and dashboard view read from a Prometheus (docs/monitoring.md).

Pure, an expanded plan or Prometheus' answers in and file contents out, except
`status.fetch_answers`, which asks Prometheus' HTTP API; `command` is the CLI's thin shell."""

# The two commands from the README:
#   make lab    install everything, bring up the lab and build the cluster on it
#               (PLAN=inventory/lab/k8s.yml: the Kubernetes lab, from the plan's mirror)
#   make test   install everything and run the whole test suite
SHELL := /bin/bash
.DEFAULT_GOAL := help
PLAN ?= inventory/lab/cluster.yml
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
# Host packages: the lab (debootstrap, nftables, iperf3, fping, netcat), the Lua tests, sshd
# for the test that checks the roles' sshd drop-in with `sshd -T` (docs/lab.md, Skips), and
# promtool/amtool for the monitoring tests (docs/monitoring.md), and the C side of the
# Kubernetes offline bundle: runc links libseccomp statically, pause is C (docs/kubernetes.md).
APT_PACKAGES := python3-venv python3-dev debootstrap iproute2 nftables iptables iperf3 fping \
	netcat-openbsd socat lua5.3 lua-busted librsvg2-bin openssh-server \
	prometheus prometheus-alertmanager chromium gcc libc6-dev libseccomp-dev
# Every `make test` keeps its evidence under reports/ (gitignored): the JUnit XML, every
# test's setup/call/teardown seconds (durations.txt) and the phase totals (phases.json),
# printed at the end against tests/budget.json (tests/support/phase_report.py).
PYTEST_ARGS ?=

.PHONY: help deps apt-deps lab lab-down test lint bench check-plans

help:
	@echo "make lab    - install everything, bring up the lab from $(PLAN), run site.yml on it"
	@echo "make test   - install everything and run the whole test suite"
	@echo "make lint   - ruff, mypy, complexity (radon), the import contract, yamllint, ansible-lint, plan schema checks"
	@echo "make bench  - print the benchmark figures"
	@echo "make lab-down - remove everything the lab made"

apt-deps:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null \
		| grep -q "install ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing host packages: $$missing"; \
		DEBIAN_FRONTEND=noninteractive apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	fi

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || /usr/bin/python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade "pip>=25.1"
	$(BIN)/pip install -q -e . --group dev
	touch $@

deps: apt-deps $(VENV)/.installed

check-plans: deps
	$(BIN)/cluster-plan validate $(PLAN) inventory/examples/*.yml
	$(BIN)/check-jsonschema --schemafile schemas/cluster-plan.schema.json $(PLAN) inventory/examples/*.yml

# A Kubernetes plan with a mirror (inventory/lab/k8s.yml) installs from the offline bundle:
# built here first when the cache lacks it (needs Go 1.26 from go.dev; a cold build is about
# 1,200 CPU-seconds, 37 min on a loaded 2-core machine, docs/kubernetes.md "What it costs"),
# verified in 4-5 s otherwise.
lab: deps
	$(BIN)/cluster-plan validate $(PLAN)
	@if $(PY) -c 'import sys; from cluster_plan.api import load_expanded; \
		k = (load_expanded(sys.argv[1]).get("scheduler") or {}).get("kubernetes") or {}; \
		sys.exit(0 if k.get("mirror") else 1)' $(PLAN); then \
		echo "the plan's Kubernetes offline bundle (built once; minutes cold, seconds warm)"; \
		$(BIN)/cluster-plan k8s bundle $(PLAN) >/dev/null; fi
	$(BIN)/cluster-plan lab up $(PLAN)
	$(BIN)/ansible -i $(PLAN) all -m ansible.builtin.ping
	$(BIN)/ansible-playbook -i $(PLAN) site.yml

lab-down: deps
	$(BIN)/cluster-plan lab down $(PLAN)

# A missing lab prerequisite fails the run (CLUSTER_PLAN_REQUIRE_LAB=1; opt out explicitly with
# CLUSTER_PLAN_SKIP_LAB=1). The last line is `N passed, N failed, N skipped`: CI reads it.
# Two pytest runs at once (tests/support/run_split.py): the session lab's chain (bring-up,
# converge, its tests, its changes), and at nice 10 beside it the rest (the Kubernetes and
# lifecycle labs, then the tests that need no lab), whose output (reports/beside.log) follows
# the session's. With PYTEST_ARGS (a selection of one's own) one pytest runs it all.
test:
	@started=$$(date +%s.%N); \
	$(MAKE) --no-print-directory deps || exit $$?; \
	tests_started=$$(date +%s.%N); mkdir -p reports; rc=0; beside=; runs=; \
	export PATH="$(abspath $(BIN)):$$PATH" CLUSTER_PLAN_REQUIRE_LAB=1; \
	if [ -z "$(PYTEST_ARGS)" ]; then \
		CLUSTER_PLAN_SPLIT=beside nice -n 10 $(BIN)/pytest -p no:cacheprovider \
			--phases=beside --junitxml=reports/beside.xml >reports/beside.log 2>&1 & \
		beside=$$!; trap 'kill -TERM $$beside 2>/dev/null; wait $$beside' INT TERM; \
		export CLUSTER_PLAN_SPLIT=session; \
	fi; \
	$(BIN)/pytest --phases=all --junitxml=reports/all.xml $(PYTEST_ARGS) || rc=$$?; \
	if [ -n "$$beside" ]; then \
		beside_rc=0; wait $$beside || beside_rc=$$?; \
		echo; echo "== the run beside the session lab's (reports/beside.log)"; \
		cat reports/beside.log; runs="beside:$$beside_rc"; \
	fi; \
	$(PY) tests/support/phase_report.py --started $$started --tests-started $$tests_started \
		all:$$rc $$runs

lint: deps
	$(BIN)/ruff check cluster_plan plugins roles tests benchmarks
	$(BIN)/ruff format --check cluster_plan plugins roles tests benchmarks
	$(PY) -m cluster_plan.ansible.role_docs --check roles/*
	$(PY) -m cluster_plan.reference_docs --check
	$(BIN)/mypy
	$(PY) tests/complexity.py
	$(PY) tests/import_contract.py
	$(BIN)/yamllint -s .
	$(BIN)/ansible-lint --profile production
	$(MAKE) check-plans

bench: deps
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# The two commands from the README:
#   make lab    install everything, bring up the lab and build the cluster on it
#   make test   install everything and run the whole test suite
SHELL := /bin/bash
.DEFAULT_GOAL := help
PLAN ?= inventory/lab/cluster.yml
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
# Host packages: the lab (debootstrap, nftables, iperf3, fping, netcat) and the Lua tests.
APT_PACKAGES := python3-venv python3-dev debootstrap iproute2 nftables iptables iperf3 fping \
	netcat-openbsd socat lua5.3 lua-busted librsvg2-bin
# The 40 slowest tests are listed at the end of every run: where CI's time goes.
PYTEST_ARGS ?= --durations=40

.PHONY: help deps apt-deps lab lab-down test lint bench check-plans

help:
	@echo "make lab    - install everything, bring up the lab from $(PLAN), run site.yml on it"
	@echo "make test   - install everything and run the whole test suite"
	@echo "make lint   - ruff, mypy, yamllint, ansible-lint, plan schema checks"
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

lab: deps
	$(BIN)/cluster-plan validate $(PLAN)
	$(BIN)/cluster-plan lab up $(PLAN)
	$(BIN)/ansible -i $(PLAN) all -m ansible.builtin.ping -o
	$(BIN)/ansible-playbook -i $(PLAN) site.yml

lab-down: deps
	$(BIN)/cluster-plan lab down $(PLAN)

test: deps
	@set -o pipefail; rc=0; \
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/pytest $(PYTEST_ARGS) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "no tests collected"; rc=0; fi; \
	exit $$rc

lint: deps
	$(BIN)/ruff check cluster_plan plugins roles tests benchmarks
	$(BIN)/ruff format --check cluster_plan plugins roles tests benchmarks
	$(PY) -m cluster_plan.role_docs --check roles/*
	$(BIN)/mypy
	$(BIN)/yamllint -s .
	$(BIN)/ansible-lint --profile production
	$(MAKE) check-plans

bench: deps
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# perfline: `make demo` and `make test` work on a fresh Debian 12 machine.
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
PYTHON ?= python3
NATIVE_CFLAGS := -O2 -g -Wall -Wextra -Werror -pthread

# Every system package perfline or its tests use. linux-perf gives `perf bench` and
# `perf stat`; dbench gives tbench/tbench_srv; postgresql gives pgbench and a server;
# debootstrap and e2fsprogs (mkfs.ext4 -d) build the root file system of VM guests; git
# is what bisection walks and checks out; chromium is the browser the dashboard tests drive
# (Playwright with executable_path: its own browser download cannot work everywhere).
APT_PACKAGES := python3 python3-venv python3-dev gcc make git procps util-linux \
	linux-perf dbench rt-tests stress-ng postgresql postgresql-client qemu-system-x86 busybox-static \
	debootstrap e2fsprogs chromium valgrind flex bison bc libelf-dev
# npm comes with Debian's nodejs and npm packages, or with a NodeSource nodejs that
# conflicts with Debian's npm package: installed only when there is no npm at all.
NPM_PACKAGES := nodejs npm

NATIVE_SRC := $(wildcard native/*.c)
NATIVE_BIN := $(patsubst native/%.c,native/build/%,$(NATIVE_SRC))
# Shared libraries that perfline's Python loads with ctypes (native/lib/NAME.c -> libNAME.so),
# which may read Python objects through Python's stable ABI (python3-dev's headers).
PYTHON_INCLUDE = $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
NATIVE_LIB_SRC := $(wildcard native/lib/*.c)
NATIVE_LIB := $(patsubst native/lib/%.c,native/build/lib%.so,$(NATIVE_LIB_SRC))

.PHONY: all install-deps install native web-assets demo screenshots test test-slow case-studies lint clean

all: install native web-assets

install-deps:
	@missing=$$(for p in $(APT_PACKAGES); do \
		dpkg-query -W -f='$${db:Status-Status}\n' $$p 2>/dev/null | grep -qx installed || echo $$p; done; \
		command -v npm >/dev/null || echo $(NPM_PACKAGES)); \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:" $$missing; \
		sudo=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q && \
		$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	fi

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

native: $(NATIVE_BIN) $(NATIVE_LIB)

# The dashboard's browser libraries (uPlot, htmx) from npm, pinned by web/package-lock.json;
# `perfline serve` serves them from web/node_modules.
web-assets: web/node_modules/.installed

web/node_modules/.installed: web/package.json web/package-lock.json
	cd web && npm ci --no-audit --no-fund --silent
	touch $@

native/build/%: native/%.c native/common.h
	@mkdir -p native/build
	$(CC) $(NATIVE_CFLAGS) -o $@ $< -lm

native/build/lib%.so: native/lib/%.c
	@mkdir -p native/build
	$(CC) $(NATIVE_CFLAGS) -shared -fPIC -I$(PYTHON_INCLUDE) -o $@ $< -lm

# A short tour on this host: a job with a two-case matrix, then the same two cases as an
# interleaved A/B with its paired statistics, then the stored runs; last, the main job: a
# tracker follows a small C project's history, finds the regression between two tested
# commits, confirms it and bisects it to its commit (examples/track/demo.sh, SQLite).
demo: install-deps install native web-assets
	$(BIN)/perfline run examples/jobs/demo.yaml --label demo
	$(BIN)/perfline ab sched-pipe -p loops=20000 --a param:cpus=0 --b param:cpus=0,1 --pairs 6 --label demo
	$(BIN)/perfline runs --limit 5
	examples/track/demo.sh $(BIN)/perfline

# docs/images/ anew from the demo's tracker store (examples/track/demo.sh in a scratch
# directory, about 2.5 minutes on this host), then axe-core's accessibility audit of every
# page of that store's dashboard (about 2 minutes): it fails on a serious or critical
# violation.
screenshots: install-deps install native web-assets
	scratch=$$(mktemp -d) && trap 'rm -rf "$$scratch"' EXIT && \
	(cd "$$scratch" && $(CURDIR)/examples/track/demo.sh $(abspath $(BIN))/perfline >demo.log 2>&1 || \
		{ cat demo.log; exit 1; }) && \
	$(BIN)/python web/pages.py --db "$$scratch/track-demo.db" screenshots docs/images && \
	$(BIN)/python web/pages.py --db "$$scratch/track-demo.db" audit

# Types and lint first: the code says it is typed, so the build checks it.
lint: install
	$(BIN)/ruff check src
	$(BIN)/mypy

# The slowest tests listed at the end: the suite's time is watched (31-37 minutes here, ~20
# asked; where it goes: docs/architecture.md, The test suite's time).
test: install-deps install native web-assets lint
	$(BIN)/pytest -q --durations=25

test-slow: install-deps install native web-assets
	$(BIN)/pytest -q -m slow
	PERFLINE_FUZZ=10000 $(BIN)/pytest -q tests/test_interop.py -k fuzz

# The seeds' experiments on this machine: regenerates docs/case-studies/ (about 7 minutes on
# this host, then about 45 for the studies in qemu guests, --vm, and two kernel builds of
# 25-40 minutes each the first time).
# The SLAB/SLUB study builds Linux 6.1 from Debian's source twice, with ccache.
case-studies: APT_PACKAGES += linux-source-6.1 ccache flex bison bc libelf-dev libssl-dev
case-studies: install-deps install native
	$(BIN)/python bench/case_studies.py --vm

clean:
	rm -rf native/build $(VENV) .pytest_cache

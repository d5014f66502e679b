# Every target does its own set-up on a fresh machine: it creates .venv, installs the package
# with what the target needs, and then runs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev
# kafkajs for tests/compat/test_kafkajs.py, pinned by tests/js/package-lock.json (needs Node/npm)
JS_DEPS := tests/js/node_modules/.package-lock.json

# pytest-xdist workers: the cluster-starting tests mostly wait on sockets and timers, so two
# workers on the 2-core CI machine halve the wall time. `--dist loadgroup` keeps a module's tests
# marked xdist_group(name) on one worker (one shared cluster instead of one per worker).
TEST_WORKERS ?= 2
PYTEST_PARALLEL = -n $(TEST_WORKERS) --dist loadgroup

.PHONY: demo test check docs bench sim sim-coverage raft-sim faults availability lint clean system-deps

SEEDS ?= 1000

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q -e '.[dev,zookeeper,etcd,spark]'
	touch $(STAMP)

$(JS_DEPS): tests/js/package.json tests/js/package-lock.json
	npm ci --prefix tests/js --no-audit --no-fund
	touch $(JS_DEPS)

system-deps: $(JS_DEPS)
	bash scripts/install-system-deps.sh

demo: $(STAMP)
	$(BIN)/python examples/demo.py

# The documentation site into site/: the generated pages (docs/gen_pages.py), then MkDocs with
# --strict, so a broken link or a docstring mkdocstrings cannot read fails the build.
docs: $(STAMP)
	$(BIN)/python docs/gen_pages.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples docs
	$(BIN)/ruff format --check src tests benchmarks examples docs
	$(BIN)/mypy --strict src/replog

# Everything, in parallel; ends with the 25 slowest tests.
test: lint system-deps
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL) --durations=25 $(PYTEST_ARGS)

# The fast inner loop (under 5 minutes on 2 cores): lint, then every test not marked `system`
# (unit, property and contract tests on the memory and raft backends, 10 simulator seeds).
check: lint
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL) -m "not system" --durations=10 $(PYTEST_ARGS)

# Deterministic simulation: many more seeds than make test runs; prints "N seeds, K violations".
sim: $(STAMP)
	$(BIN)/python -m replog.testing.sim --seeds $(SEEDS)

# What the simulator alone covers of the broker driver, replica manager and request handlers
# (SEEDS seeds, 100 unless given).
SIM_COVERED = src/replog/broker/driver/core.py,src/replog/broker/driver/client_requests.py,src/replog/broker/driver/controller_role.py,src/replog/broker/driver/convert.py,src/replog/broker/driver/effects.py,src/replog/broker/driver/fetch_sessions.py,src/replog/broker/driver/metadata_channel.py,src/replog/broker/driver/outbox.py,src/replog/broker/driver/log_cleaning.py,src/replog/broker/driver/stop_sequence.py,src/replog/broker/driver/replica_manager.py,src/replog/broker/driver/requests/*,src/replog/broker/driver/group_host.py,src/replog/groups/*
sim-coverage: $(STAMP)
	$(BIN)/coverage run --data-file=.coverage.sim -m replog.testing.sim --seeds $(if $(filter 1000,$(SEEDS)),100,$(SEEDS))
	$(BIN)/coverage report --data-file=.coverage.sim --include='$(SIM_COVERED)'

# The metadata quorum's simulator (replog.testing.raft_sim): SEEDS seeds; prints
# "N seeds, K violations".
raft-sim: $(STAMP)
	$(BIN)/python -m replog.testing.raft_sim.sim --seeds $(SEEDS) --stats

# Only the multi-process fault suite (real broker processes on ZooKeeper; make test runs it too).
faults: $(STAMP) system-deps
	$(BIN)/python -m pytest -q -m faults tests/faults

# Issue 23's availability report: the faults that time their longest stretch without an
# acknowledged write, three runs on each coordinator (ZooKeeper, the built-in raft quorum, combined
# mode).
AVAILABILITY_TESTS = tests/faults/test_min_isr_return.py tests/faults/test_replication_faults.py::test_acked_records_survive
availability: $(STAMP) system-deps
	for run in 1 2 3; do for coord in zookeeper raft combined; do \
	  REPLOG_FAULTS_COORDINATOR=$$coord $(BIN)/python -m pytest -q -p no:xdist $(AVAILABILITY_TESTS) | sed -n '/fault availability/,$$p' | sed "s/^/$$coord run $$run: /"; \
	done; done

bench: $(STAMP)
	$(BIN)/python -m benchmarks.storage

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache tests/js/node_modules site

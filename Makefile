# The README's two commands: `make run` and `make test`. Both create .venv when missing.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

# make run: the default algorithm (IMPACT_EXT) on an embedded env (CartPole-v1) with its tuned
# settings, for at most 3 minutes. Override: make run RUN_FILE=tuned_examples/es_ext/cartpole-v1.yaml
RUN_FILE ?= tuned_examples/impact_ext/cartpole-v1.yaml
STOP     ?= {"time_total_s": 180}
RUN_ARGS ?=

PYTEST_ARGS ?=

.PHONY: install run lint format typecheck test test-unit learning-tests bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# torch first, pinned: on these machines 2.13.0 is a CPU wheel on local disk; an unpinned torch
# would pull a multi-GB CUDA build. The package itself only asks for torch>=2.4. The `atari` extra
# (ale-py, opencv-python-headless) is for rllib_ext/Atari42-v0 and its tests.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e ".[dev,atari]"
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/rllib train file $(RUN_FILE) --stop '$(STOP)' $(RUN_ARGS)

# ruff (configured in pyproject.toml): lint and format check; make test runs it first.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# mypy (configured in pyproject.toml): the whole package at the basic level, strict on optim/, common/
# and experiment.py; make test runs it after lint.
typecheck: $(STAMP)
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# Tiers are folders under tests/ (unit, smoke, reliability, learning). make test: every tier but the
# long learning runs (CI); make test-unit: seconds, no Ray; make learning-tests: the tuned examples.
test: lint typecheck
	$(BIN)/python -m pytest -m "not learning_long" $(PYTEST_ARGS)

test-unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit $(PYTEST_ARGS)

learning-tests: $(STAMP)
	$(BIN)/python -m pytest -m learning_long $(PYTEST_ARGS)

# make docs: each docs/algorithms/<name>.md settings table, regenerated from the Config classes’
# Setting tables (rllib_ext/settings.py); tests/unit/test_settings.py fails while a page is out of date.
.PHONY: docs
docs: $(STAMP)
	$(BIN)/python -m rllib_ext.settings --write-docs

bench: $(STAMP)
	$(BIN)/python -m benchmarks $(BENCH_ARGS)

# make bench-report: every figure (docs/results/*.png), the summary table in benchmarks/RESULTS.md
# and the docs pages' results blocks (<!-- results:begin BENCHMARK/RACE --> ... <!-- results:end -->),
# regenerated from the committed rows under benchmarks/results/ (benchmarks/harness/report.py, on
# rllib_ext/compare/report.py: what `rllib report` draws for anyone's races); tests/unit/test_docs.py
# fails while a block is out of date.
.PHONY: bench-report
bench-report: $(STAMP)
	$(BIN)/python -m benchmarks.harness.report

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .mypy_cache

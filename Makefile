# The README's two commands: `make run` and `make test`. Both create .venv when missing.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

# make run: the default algorithm on an embedded env for a few minutes (override on the command line).
ALGO   ?= IMPACT_EXT
ENV    ?= CartPole-v1
STOP   ?= {"time_total_s": 180, "env_runners/episode_return_mean": 450}
RUN_ARGS ?= --num-env-runners 1

PYTEST_ARGS ?=

.PHONY: install run test learning-tests bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# torch first, pinned: on these machines 2.13.0 is a CPU wheel on local disk; an unpinned torch
# would pull a multi-GB CUDA build. The package itself only asks for torch>=2.4.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/rllib train --algo $(ALGO) --env $(ENV) --stop '$(STOP)' $(RUN_ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest -m "not learning" $(PYTEST_ARGS)

learning-tests: $(STAMP)
	$(BIN)/python -m pytest -m learning $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python -m benchmarks $(BENCH_ARGS)

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache

# Two commands: `make run` and `make test`. See README.md.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test lint format env env-test clean

env:
	PYTHON=$(PYTHON) installers/setup_env.sh

env-test:
	PYTHON=$(PYTHON) installers/setup_env.sh test

run: env
	$(BIN)/hearth

test: env-test
	$(BIN)/ruff check app engine kernels tests installers
	$(BIN)/ruff format --check app engine kernels tests installers
	$(BIN)/lint-imports
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest

lint:
	$(BIN)/ruff check app engine kernels tests installers

format:
	$(BIN)/ruff format app engine kernels tests installers
	$(BIN)/ruff check --fix app engine kernels tests installers

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache

# Two commands: `make run` and `make test`. See README.md.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test test-vulkan lint format env env-test clean

env:
	PYTHON=$(PYTHON) installers/setup_env.sh

env-test:
	PYTHON=$(PYTHON) installers/setup_env.sh test

run: env
	$(BIN)/hearth

test: env-test
	$(BIN)/ruff check app engine kernels tests installers benchmarks testkit
	$(BIN)/ruff format --check app engine kernels tests installers benchmarks testkit
	$(BIN)/lint-imports
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -n auto --dist loadfile --durations=25

# The Vulkan build in its own environment, on Mesa's software device (Debian: glslc,
# libvulkan-dev, mesa-vulkan-drivers), checked against the CPU build's greedy output.
test-vulkan: env-test
	PYTHON=$(PYTHON) installers/test_vulkan.sh

lint:
	$(BIN)/ruff check app engine kernels tests installers benchmarks testkit

format:
	$(BIN)/ruff format app engine kernels tests installers benchmarks testkit
	$(BIN)/ruff check --fix app engine kernels tests installers benchmarks testkit

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache

# The two commands a newcomer needs: `make demo` and `make test`. Each sets everything up first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup demo test clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@

demo: setup
	$(BIN)/portcheck scan examples/cuda_app --target tpu,neuron --exit-zero

test: setup
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info

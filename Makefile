# The two commands a newcomer needs: `make demo` and `make test`. Each sets everything up first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The end-to-end fix tests run the fixed programs on CPU torch; pin the CPU build (a range would
# pull a multi-GB CUDA build). Installed first so the project's extras do not replace it.
TORCH ?= torch==2.13.0

.PHONY: setup demo smoke-demo docs bench bench-smoke sweep fuzz test clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@

demo: setup
	$(BIN)/portcheck scan examples/cuda_app --target tpu,neuron --exit-zero

smoke-demo: setup
	$(BIN)/portcheck smoke examples/smoke/models.py:classifier --device tpu --emulate --train --steps 3

# The rule pages under docs/rules/, from the rules' docstrings (a test checks they are current).
docs: setup
	$(BIN)/python -m portcheck.rule_docs

# Not part of the tests: downloads a pinned corpus and the peers (TorchFix, Ruff), prints a table.
bench: setup
	$(BIN)/python -m pip install --quiet -r bench/requirements.txt
	$(BIN)/python bench/run.py

# What a smoke case costs: six small cases in one run against one run per case.
bench-smoke: setup
	$(BIN)/python bench/smoke.py

# Not part of the tests either: real code through scan and fix, and the long fuzz run.
sweep: setup
	$(BIN)/python bench/sweep.py diffusers==0.31.0

fuzz: setup
	$(BIN)/python -m pytest tests/test_fuzz.py --hypothesis-profile=fuzz-long -p no:cacheprovider

test: setup
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info

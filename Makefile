# Every target creates and uses the local virtual environment .venv: a fresh machine
# needs only Python 3.11+ (and, for `make bench`, the load generator wrk).
VENV   := .venv
PYTHON := $(VENV)/bin/python
READY  := $(VENV)/.installed
BOOTSTRAP_PYTHON ?= python3

.PHONY: demo test lint bench clean

$(READY): pyproject.toml
	$(BOOTSTRAP_PYTHON) -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet -e '.[dev]'
	touch $(READY)

demo: $(READY)
	$(VENV)/bin/clubwire demo

# One test process per core, and one more: much of the suite waits on servers, browsers and
# subprocesses. On 2 cores the whole suite took 1,088 s in one process, 685 s in 2, 590 s in 3.
TEST_PROCESSES ?= $(shell $(BOOTSTRAP_PYTHON) -c 'import os; print((os.cpu_count() or 1) + 1)')

test: $(READY)
	$(VENV)/bin/pytest -n $(TEST_PROCESSES) --dist worksteal

lint: $(READY)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

bench: $(READY)
	$(PYTHON) bench/api.py
	$(PYTHON) bench/delivery.py
	$(PYTHON) bench/delivery.py --ordered --events 1000
	$(PYTHON) bench/attempt.py
	$(PYTHON) bench/publish.py
	$(PYTHON) bench/burst.py
	$(PYTHON) bench/neighbours.py
	$(PYTHON) bench/retries.py
	$(PYTHON) bench/throttling.py
	$(PYTHON) bench/erasure.py
	$(PYTHON) bench/tracing.py
	$(PYTHON) bench/kept.py
	$(PYTHON) bench/notify.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis

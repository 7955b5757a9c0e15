# The two commands a newcomer needs: `make run` and `make test`. Everything else is optional.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: run test test-quick test-js test-engine test-inprocess screenshots bench lint vendor install clean bytecode

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@rm -f $(VENV)/.installed-*
	@touch $@

# The suite starts ~1,000 Python processes: with PYTHONDONTWRITEBYTECODE set (as on some machines) each would
# compile the project's sources again. compileall writes the bytecode once (it skips files that did not change).
bytecode: install
	@$(PY) -m compileall -q -j 0 workflows dashboard tests bench scripts manage.py

## Start everything: web (daphne), workers (ai, io, default), scheduler, private Redis if REDIS_URL is unset.
run: install
	$(PY) scripts/devrun.py run

# The suite runs in two tiers (tests/conftest.py marks the second): the in-process tier on PYTEST_WORKERS
# pytest-xdist workers (each with its own test database and Redis database, tests/settings.py), then the
# `serial` tier (real worker, scheduler and daphne processes, the browser, fault injection, the dev runner) on
# SERIAL_WORKERS: its tests mostly wait on the processes they start, so three run side by side on two cores. The
# second tier runs only when the first passed. Each prints its 25 slowest tests.
# TESTS narrows the paths, SELECT adds a marker expression, PYTEST_ARGS passes anything else to pytest; a tier
# they leave empty passes (pytest's exit code 5, "no tests collected").
PYTEST_WORKERS ?= 2
SERIAL_WORKERS ?= 3
TESTS ?=
SELECT ?=
marks = $(if $(strip $(SELECT)),$(1) and ($(SELECT)),$(1))
tier = { $(PY) -m pytest $(TESTS) -m "$(call marks,$(1))" --durations=25 $(2) $(PYTEST_ARGS) || [ $$? -eq 5 ]; }
PARALLEL = -n $(PYTEST_WORKERS) --dist load
SERIAL = -n $(SERIAL_WORKERS) --dist load

## The whole suite, both tiers (starts a private Redis when REDIS_URL is unset), then the JavaScript unit tests
## (not when TESTS names a part of the suite).
test: install bytecode
	$(PY) scripts/devrun.py with-redis -- sh -c '$(call tier,not serial,$(PARALLEL)) && $(call tier,serial,$(SERIAL))'
	@$(if $(strip $(TESTS)),,$(MAKE) --no-print-directory test-js)

## The edit loop (< 2 minutes): the in-process tier, in parallel, on SQLite (the private Redis unless REDIS_URL is set).
test-quick: install bytecode
	env -u DATABASE_URL $(PY) scripts/devrun.py with-redis -- sh -c '$(call tier,not serial,$(PARALLEL))'

## The JavaScript unit tests: tests/js/*.test.mjs import the real modules of static/js (node --test).
test-js: install
	@if command -v node >/dev/null 2>&1; then node --test tests/js/; \
	else echo "SKIPPED the JavaScript unit tests (tests/js): node is not installed (apt-get install nodejs)"; fi

## The engine suite only (engine, runtime and stores in process, workflows on real workers; no browser), both tiers.
test-engine: TESTS = tests/engine tests/runtime tests/store tests/workflows
test-engine: install bytecode
	$(PY) scripts/devrun.py with-redis -- sh -c '$(call tier,not serial,$(PARALLEL)) && $(call tier,serial,$(SERIAL))'

## The in-process layers only (engine, runtime, stores: no worker processes, no browser), in parallel.
test-inprocess: TESTS = tests/engine tests/runtime tests/store
test-inprocess: install bytecode
	$(PY) scripts/devrun.py with-redis -- sh -c '$(call tier,not serial,$(PARALLEL))'

## The pictures of the README and docs/ (docs/screenshots/): only the browser tests marked `screenshots` (those
## that take the doc_shot fixture, tests/e2e/docshots.py), with STEADYFLOW_SCREENSHOTS=1; no other run writes them.
## Look at every picture it rewrote before committing it.
screenshots: install
	STEADYFLOW_SCREENSHOTS=1 $(PY) scripts/devrun.py with-redis -- sh -c '$(call tier,screenshots,$(SERIAL))'

## Benchmarks: one JSON line per workload on stdout (each run makes its own database and Redis).
bench: install
	$(PY) -m bench

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy workflows dashboard

clean:
	rm -rf var/*.sqlite3* var/redis var/redis.sock

## Re-fetch the pinned front-end libraries (package.json) into static/vendor.
vendor:
	bash scripts/vendor.sh

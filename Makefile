# The two commands a newcomer needs: `make run` and `make test`. Everything else is optional.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: run test test-js test-engine test-inprocess bench lint vendor install clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@rm -f $(VENV)/.installed-*
	@touch $@

## Start everything: web (daphne), workers (ai, io, default), scheduler, private Redis if REDIS_URL is unset.
run: install
	$(PY) scripts/devrun.py run

## The whole suite (starts a private Redis when REDIS_URL is unset), then the JavaScript unit tests.
test: install
	$(PY) scripts/devrun.py with-redis -- $(PY) -m pytest $(PYTEST_ARGS)
	@$(MAKE) --no-print-directory test-js

## The JavaScript unit tests: tests/js/*.test.mjs import the real modules of static/js (node --test).
test-js: install
	@if command -v node >/dev/null 2>&1; then node --test tests/js/; \
	else echo "SKIPPED the JavaScript unit tests (tests/js): node is not installed (apt-get install nodejs)"; fi

## The engine suite only (engine, runtime and stores in process, workflows on real workers; no browser).
test-engine: install
	$(PY) scripts/devrun.py with-redis -- $(PY) -m pytest tests/engine tests/runtime tests/store tests/workflows $(PYTEST_ARGS)

## The in-process layers only (engine, runtime, stores: no worker processes, no browser): CI's ORM-store pass.
test-inprocess: install
	$(PY) scripts/devrun.py with-redis -- $(PY) -m pytest tests/engine tests/runtime tests/store $(PYTEST_ARGS)

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

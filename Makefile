# Ramino: `make demo` runs the demo, `make test` runs the tests. Both set everything up first.
PYTHON ?= python3
TOOLS := .tools
UV := $(TOOLS)/bin/uv
UV_VERSION := 0.13.9
RUN := $(UV) run --frozen --no-sync
export UV_PYTHON_DOWNLOADS := never

.PHONY: demo test check lint typecheck format bench clean web screenshots

# A private uv so a fresh machine needs nothing but Python 3.11+.
$(UV):
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/python -m pip install --quiet "uv==$(UV_VERSION)"

.venv/.synced: $(UV) pyproject.toml uv.lock server/engine/compiled.py bots/gin_compiled.py
	$(UV) sync --frozen --python $(PYTHON)
	$(RUN) python -m server.engine.compiled
	$(RUN) python -m bots.gin_compiled
	@touch $@

demo: .venv/.synced
	$(RUN) ramino demo --web 127.0.0.1:8080

test: .venv/.synced
	$(RUN) pytest

lint: .venv/.synced
	$(RUN) ruff check .
	$(RUN) ruff format --check .

typecheck: .venv/.synced
	$(RUN) mypy

check: lint typecheck test

format: .venv/.synced
	$(RUN) ruff format .
	$(RUN) ruff check --fix .

bench: .venv/.synced
	$(RUN) python -m bench.engine

clean:
	rm -rf .venv $(TOOLS) .mypy_cache .ruff_cache .pytest_cache

# The web page: bundle web/src into server/web_static (needs Node and npm; the build is shipped).
web:
	cd web && npm ci --no-audit --no-fund && node build.mjs

# docs/web/*.png: the browser test's screenshots, written into docs/ (a plain test run does not).
screenshots: .venv/.synced
	RAMINO_SCREENSHOTS=1 $(RUN) pytest tests/web/test_browser.py

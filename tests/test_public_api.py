"""The public surface: `hyper_assets.__all__`, all importable, and what the docs use."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

import hyper_assets

ROOT = Path(__file__).parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.spark  # HyperExtractComponent's tables are Spark assets
def test_every_public_name_imports():
    assert hyper_assets.__all__ == sorted(hyper_assets.__all__)
    namespace: dict[str, object] = {}
    exec("from hyper_assets import *", namespace)
    assert set(hyper_assets.__all__) <= set(namespace)


def test_the_emulator_and_the_errors_start_without_spark_or_dagster():
    """`__init__` imports each public name when first used (`__init__.pyi`), so the
    emulator's process and a caller of the errors load neither Spark nor Dagster."""
    code = (
        "import sys, hyper_assets.errors, hyper_assets.emulator.__main__; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pyspark', 'dagster'}))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert loaded.stdout.strip() == "[]"
    # Without dagster-pyspark, dir() leaves the component out (Dagster's discovery reads it).
    spark = importlib.util.find_spec("dagster_pyspark") is not None
    public = [n for n in hyper_assets.__all__ if spark or n != "HyperExtractComponent"]
    assert dir(hyper_assets) == public


def test_the_docs_import_only_public_names():
    """Every `from hyper_assets import ...` in the README and docs/ names a public name."""
    used = set()
    for doc in DOCS:
        text = doc.read_text()
        for wrapped, line in re.findall(
            r"from hyper_assets import (?:\(([^)]*)\)|([\w, ]+))", text
        ):
            used |= {n.strip() for n in (wrapped or line).split(",") if n.strip()}
    assert used and used <= set(hyper_assets.__all__), used - set(hyper_assets.__all__)


def test_the_docs_import_modules_only_where_they_are_public():
    """Besides the package, the docs import only the two modules `__init__` calls public;
    the names docs/api.md says the action module has are there."""
    from hyper_assets.tableau import actions

    modules = {
        m
        for doc in DOCS
        for m in re.findall(r"from (hyper_assets\.[\w.]+) import", doc.read_text())
    }
    assert modules <= {"hyper_assets.emulator", "hyper_assets.tableau.actions"}, modules
    assert {"Insert", "Upsert", "Delete", "parse_batch"} <= set(actions.__all__)


def test_the_docs_list_the_public_api():
    """docs/api.md's "Public API" table names exactly `__all__`, and its reference renders
    each name once: add a new export to both."""
    page = (ROOT / "docs" / "api.md").read_text()
    section = page.split("# Public API\n", 1)[1].split("\n## ", 1)[0]
    table = section[section.index("| for | names |") :]
    listed = set(re.findall(r"`(\w+)`", table)) - {"__all__"}
    assert listed == set(hyper_assets.__all__), listed ^ set(hyper_assets.__all__)
    rendered = re.findall(r"^::: hyper_assets\.(\w+)$", page, re.M)
    assert sorted(rendered) == sorted(hyper_assets.__all__), set(rendered) ^ set(listed)


@pytest.mark.spark  # the component's
def test_every_config_field_says_what_it_is():
    """Every field a user sets, in Python config or in the component's YAML, has the
    description that Dagster's UI, `dg` and the docs show."""
    from hyper_assets._component import specs
    from hyper_assets._engine.compaction import AutoCompact
    from hyper_assets._home.stores import StoreCredentials

    configs = [
        hyper_assets.TableauServerResource,
        hyper_assets.TokenSignIn,
        hyper_assets.ConnectedAppSignIn,
        hyper_assets.HomeSettings,
        hyper_assets.S3Settings,
        hyper_assets.AzureSettings,
        StoreCredentials,
        hyper_assets.HyperResource,
        hyper_assets.HyperIOManager,
        hyper_assets.HyperDatabase,
        hyper_assets.S3Staging,
        AutoCompact,
        hyper_assets.PublishConfig,
    ]
    yaml = [
        hyper_assets.HyperExtractComponent,
        specs.FileSource,
        specs.ColumnSpec,
        specs.TableYaml,
        specs.SparkSpec,
        specs.AdoptSpec,
        specs.ChecksSpec,
        specs.TokenSignInSpec,
        specs.ConnectedAppSignInSpec,
        specs.TableauServerSpec,
        specs.PublishSpec,
    ]
    fields = {(c.__name__, n): f for c in configs for n, f in c.model_fields.items()}
    fields |= {(c.__name__, n): f for c in yaml for n, f in c.model().model_fields.items()}
    undescribed = sorted(key for key, field in fields.items() if not field.description)
    assert len(fields) > 100 and not undescribed, undescribed


def test_the_docs_list_the_default_connected_app_scopes():
    """Users configure `ConnectedAppSignIn(scopes=...)`: docs/publishing.md lists the
    default, instead of sending them to an internal constant."""
    from hyper_assets.tableau._rest.connected_app import PUBLISH_SCOPES

    text = (ROOT / "docs" / "publishing.md").read_text()
    assert "connected_app.PUBLISH_SCOPES" not in text
    assert all(f"`{scope}`" in text for scope in PUBLISH_SCOPES)

"""Shared fixtures: one real hyperd and one local Spark session per test session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hyper_assets.process import SharedHyper


@pytest.fixture(scope="session")
def hyper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedHyper]:
    """A real hyperd for tests that work on `.hyper` files directly."""
    shared = SharedHyper(log_dir=tmp_path_factory.mktemp("hyperd-logs"))
    yield shared
    shared.close()

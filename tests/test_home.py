"""The extract's home: a local path as always, and never a URI taken for a local path."""

from pathlib import Path

import pytest

from hyper_assets import HyperIOManager, UnsupportedHomeError
from hyper_assets.home import relative_to


@pytest.mark.parametrize(
    "uri", ["s3://extracts/shop.hyper", "gs://b/x.hyper", "abfss://c@a.dfs/x.hyper", "sftp://h/x"]
)
def test_a_store_the_library_cannot_serve_is_refused_at_definition(uri, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnsupportedHomeError, match="cannot keep the file in"):
        HyperIOManager(database=uri)
    with pytest.raises(UnsupportedHomeError):
        relative_to(uri, tmp_path)
    assert list(tmp_path.iterdir()) == []  # nothing was taken for a local path


def test_local_paths_are_kept_as_given(tmp_path):
    assert HyperIOManager(database="data/flights.hyper").database == "data/flights.hyper"
    assert HyperIOManager(database="./a:b.hyper").database == "./a:b.hyper"
    assert relative_to("data/x.hyper", tmp_path) == str(tmp_path / "data" / "x.hyper")
    assert relative_to(str(tmp_path / "x.hyper"), Path("/elsewhere")) == str(tmp_path / "x.hyper")

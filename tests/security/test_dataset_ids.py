"""An over-long Minari id is refused in one line before the file system is touched (issue 30, item
10c); check_local_dataset needs no extra, minari_to_buffer needs the minari extra."""

from __future__ import annotations

from pathlib import Path

import pytest

from tshtrain.data.minari import check_local_dataset
from tshtrain.errors import ConfigurationError


@pytest.mark.parametrize("dataset_id", ["x" * 10_000, "ns/" + "a" * 300 + "-v0", "/".join(["ab"] * 200)])
def test_an_over_long_minari_id_is_refused_in_one_line(dataset_id: str, tmp_path: Path) -> None:
    missing_root = tmp_path / "never-created"
    with pytest.raises(ConfigurationError) as raised:
        check_local_dataset(dataset_id, missing_root)
    message = str(raised.value)
    assert "\n" not in message and len(message) < 400, message
    assert f"({len(dataset_id)} chars)" in message and "at most 255 characters" in message
    assert not missing_root.exists()


def test_a_long_but_allowed_id_reaches_the_file_system(tmp_path: Path) -> None:
    assert (
        check_local_dataset("ns/" + "a" * 100 + "-v0", tmp_path)
        == tmp_path / "ns" / ("a" * 100 + "-v0") / "data"
    )


@pytest.mark.integration
def test_minari_to_buffer_refuses_an_over_long_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.extras import need

    need("minari", "minari")
    from tshtrain.data.minari import minari_to_buffer

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "datasets"))
    with pytest.raises(
        ConfigurationError, match=r"\(10000 chars\) is too long; a Minari id has at most 255 characters\."
    ):
        minari_to_buffer("x" * 10_000)

"""Loading a Minari dataset never imports what the file names and never reads outside the dataset's
directory (the Minari half of test_datasets.py; needs the minari extra)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.extras import need
from tshtrain.data import ReplayBuffer
from tshtrain.errors import BufferFormatError, ConfigurationError

# ---------------------------------------------------------------------------- Minari
pytestmark = pytest.mark.integration
minari = need("minari", "minari")


BAD_IDS = ["../escape-v0", "/etc/passwd", "ns/../../x-v0", ".hidden-v0", "a//b-v0", "ns/name-v0\x00",
           "a\\..\\b-v0", "x" * 300 + "/../y"]  # fmt: skip


@pytest.mark.parametrize("dataset_id", BAD_IDS)
def test_minari_ids_must_be_plain_names(
    dataset_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tshtrain.data.minari import minari_to_buffer

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "datasets"))
    with pytest.raises(ConfigurationError, match="is not a Minari id such as 'namespace/name-v0'"):
        minari_to_buffer(dataset_id)


def test_a_minari_dataset_linked_from_outside_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tshtrain.data.minari import minari_to_buffer

    root = tmp_path / "datasets"
    (tmp_path / "elsewhere" / "data").mkdir(parents=True)
    (root / "ns").mkdir(parents=True)
    (root / "ns" / "linked-v0").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(root))
    with pytest.raises(BufferFormatError, match="outside the Minari datasets directory"):
        minari_to_buffer("ns/linked-v0")


@pytest.mark.parametrize("missing", ["observation_space", "action_space"])
def test_a_minari_dataset_naming_an_entry_point_is_refused_without_importing_it(
    missing: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tshtrain.data.minari import minari_to_buffer

    marker = tmp_path / "pwned"
    code_dir = tmp_path / "code"
    code_dir.mkdir()
    (code_dir / "evil_env_module.py").write_text(f"import os\nos.mkdir({str(marker)!r})\nmake = None\n")
    monkeypatch.syspath_prepend(str(code_dir))
    root = tmp_path / "datasets"
    data = root / "evil-v0" / "data"
    data.mkdir(parents=True)
    metadata = {
        "dataset_id": "evil-v0",
        "observation_space": '{"type": "Box"}',
        "action_space": '{"type": "Discrete"}',
        "env_spec": json.dumps(
            {"id": "Evil-v0", "entry_point": "evil_env_module:make", "additional_wrappers": []}
        ),
        "data_format": "hdf5",
        "minari_version": "0.5.4",
    }
    del metadata[missing]
    (data / "metadata.json").write_text(json.dumps(metadata))
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(root))
    with pytest.raises(BufferFormatError, match=rf"no {missing}; .*entry point 'evil_env_module:make'"):
        minari_to_buffer("evil-v0")
    assert not marker.exists() and "evil_env_module" not in sys.modules


def test_a_real_minari_dataset_still_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gymnasium as gym

    from tshtrain.data.minari import minari_to_buffer

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    env = minari.DataCollector(gym.make("CartPole-v1"))
    env.reset(seed=0)
    for _ in range(20):
        _, _, terminated, truncated, _ = env.step(0)
        if terminated or truncated:
            env.reset()
    env.create_dataset(dataset_id="test/cartpole-v0", algorithm_name="zeros", description="security test")
    env.close()
    buffer = minari_to_buffer("test/cartpole-v0")
    assert isinstance(buffer, ReplayBuffer) and len(buffer) == 20

"""Envs and buffers that take a ``device`` refuse one this machine lacks with tshtrain's own one-line
:class:`ConfigurationError` (naming the component, the device and what to use instead), before VMAS
or torch fail with their own errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from tests.extras import need
from tshtrain.data import TensorReplayBuffer
from tshtrain.devices import component_device
from tshtrain.env.torch_cartpole import TorchCartPole
from tshtrain.errors import ConfigurationError

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")


def _vmas(device: str) -> Any:
    need("vmas", "vmas")
    from tshtrain.env.vmas import VmasEnv

    return VmasEnv("navigation", num_envs=2, device=device, seed=0)


MAKERS: dict[str, Callable[[str], Any]] = {
    "VmasEnv": _vmas,
    "TensorReplayBuffer": lambda device: TensorReplayBuffer(8, 2, device=device, seed=0),
    "TorchCartPole": lambda device: TorchCartPole(2, device=device, seed=0),
}
OWNERS = [
    pytest.param(name, marks=pytest.mark.integration) if name == "VmasEnv" else name
    for name in sorted(MAKERS)
]
"""the VMAS case needs the optional vmas package: the integration tier runs it"""


@no_cuda
@pytest.mark.parametrize("owner", OWNERS)
@pytest.mark.parametrize("device", ["cuda", "cuda:1"])
def test_a_missing_cuda_device_is_one_line_naming_owner_device_and_fix(owner: str, device: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        MAKERS[owner](device)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{owner}: device '{device}': cuda requested but ")
    assert "torch.cuda.is_available() is False" in message
    assert "use device=cpu" in message


@pytest.mark.parametrize("owner", OWNERS)
def test_an_unknown_device_form_names_the_allowed_forms(owner: str) -> None:
    with pytest.raises(
        ConfigurationError, match=rf"^{owner}: device 'gpu' is not allowed; allowed: auto, cpu"
    ):
        MAKERS[owner]("gpu")


@pytest.mark.parametrize("owner", OWNERS)
def test_the_cpu_still_works(owner: str) -> None:
    made = MAKERS[owner]("cpu")
    assert made.device == torch.device("cpu")


def test_component_device_resolves_like_resolve_device() -> None:
    assert component_device("cpu", owner="X") == torch.device("cpu")
    assert component_device(torch.device("cpu"), owner="X") == torch.device("cpu")

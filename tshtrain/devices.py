"""Devices: which ``torch.device`` a run uses, and random generators that follow their tensors there.

* :func:`resolve_device` turns the ``device`` setting (``auto``, ``cpu``, ``cuda``, ``cuda:N``, ``mps``)
  into a ``torch.device`` with an index where tensors carry one (``cuda`` -> ``cuda:<current>``), so it
  compares equal to ``tensor.device``.
* :func:`component_device` is :func:`resolve_device` for the ``device`` argument of an env or a buffer:
  its errors start with the component's name, and come before any library (VMAS, torch) fails.
* :func:`move_generator` gives a ``torch.Generator`` on another device. A generator must live on the
  device of the tensors it samples; a CPU generator's state cannot be set on a CUDA generator (nor the
  reverse), so across device types the new generator is seeded deterministically from the old one's
  state (:func:`seed_from_state`).
* :func:`restore_generator_state` sets a saved state, reseeding deterministically (and warning once per
  pair of state sizes) when the state was saved by a generator of another device type: **the RNG state
  of a CUDA generator is not portable** to a CPU generator, nor the reverse.

Layer 0: torch and :mod:`tshtrain.errors` only.
"""

from __future__ import annotations

import hashlib
import re
import warnings

import torch

from tshtrain.errors import ConfigurationError

DEVICE_FORMS = "auto, cpu, cuda, cuda:N (N = a CUDA device index), mps"
"""the values the ``device`` setting takes, for error messages and docs"""

_DEVICE_PATTERN = re.compile(r"(?P<type>cpu|cuda|mps)(?::(?P<index>\d+))?")
_warned_state_sizes: set[tuple[int, str]] = set()
"""(saved state size, device type) pairs already warned about by :func:`restore_generator_state`"""


def check_device_form(spec: str) -> str:
    """``spec`` stripped and lower-cased if it has one of the allowed forms (:data:`DEVICE_FORMS`),
    whether or not this machine has that device (e.g. an experiment file written on a GPU machine read
    on a CPU one); :func:`resolve_device` checks availability.

    Raises:
        ConfigurationError: another value, naming it and the allowed forms.
    """
    text = spec.strip().lower()
    if text != "auto" and _DEVICE_PATTERN.fullmatch(text) is None:
        raise ConfigurationError(f"device {spec!r} is not allowed; allowed: {DEVICE_FORMS}.")
    return text


def resolve_device(spec: str | torch.device) -> torch.device:
    """The ``torch.device`` that ``spec`` names, checked to be available on this machine.

    Args:
        spec: ``"auto"`` (CUDA when ``torch.cuda.is_available()``, else CPU), ``"cpu"``, ``"cuda"`` (the
            current CUDA device), ``"cuda:N"``, ``"mps"``, or a ``torch.device`` of those types.

    Returns:
        ``cpu``, ``cuda:N`` (always with its index) or ``mps:0``: equal to the ``.device`` of tensors
        placed there.

    Raises:
        ConfigurationError: the value is not one of the forms above, or names a device this machine
            does not have (e.g. ``cuda`` when ``torch.cuda.is_available()`` is False).
    """
    if isinstance(spec, torch.device):
        text = str(spec)
    elif isinstance(spec, str):
        text = spec.strip().lower()
    else:
        raise ConfigurationError(
            f"device must be a string or torch.device, got {spec!r}; allowed: {DEVICE_FORMS}."
        )
    if text == "auto":
        return resolve_device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    match = _DEVICE_PATTERN.fullmatch(text)
    if match is None:
        raise ConfigurationError(f"device {spec!r} is not allowed; allowed: {DEVICE_FORMS}.")
    kind, index = match["type"], match["index"]
    if kind == "cpu":
        if index not in (None, "0"):
            raise ConfigurationError(f"device {spec!r}: the CPU has no index {index}; use 'cpu'.")
        return torch.device("cpu")
    if kind == "mps":
        if not torch.backends.mps.is_available():
            raise ConfigurationError(
                f"device {spec!r}: mps requested but torch.backends.mps.is_available() is False; "
                f"use device=cpu (or auto)."
            )
        if index not in (None, "0"):
            raise ConfigurationError(f"device {spec!r}: there is one mps device; use 'mps'.")
        return torch.device("mps", 0)
    return _cuda_device(spec, None if index is None else int(index))


def component_device(spec: str | torch.device, *, owner: str) -> torch.device:
    """:func:`resolve_device` of a component's ``device`` argument, e.g.
    ``component_device(device, owner="VmasEnv")``.

    Raises:
        ConfigurationError: as :func:`resolve_device`, the message starting with ``owner``, e.g.
            ``VmasEnv: device 'cuda': cuda requested but torch.cuda.is_available() is False ...``.
    """
    try:
        return resolve_device(spec)
    except ConfigurationError as error:
        raise ConfigurationError(f"{owner}: {error}") from None


def _cuda_device(spec: str | torch.device, index: int | None) -> torch.device:
    if not torch.cuda.is_available():
        raise ConfigurationError(
            f"device {spec!r}: cuda requested but torch.cuda.is_available() is False (torch "
            f"{torch.__version__}); use device=cpu, or auto to take CUDA only when there is one."
        )
    count = torch.cuda.device_count()
    if index is None:
        index = torch.cuda.current_device()
    if index >= count:
        raise ConfigurationError(
            f"device {spec!r}: this machine has {count} CUDA device(s), cuda:0 to cuda:{count - 1}."
        )
    return torch.device("cuda", index)


def seed_from_state(state: torch.Tensor) -> int:
    """A 63-bit seed derived from a generator state (its bytes hashed): deterministic, and it draws
    nothing from the generator."""
    digest = hashlib.sha256(state.detach().cpu().contiguous().numpy().tobytes()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def move_generator(generator: torch.Generator, device: torch.device) -> torch.Generator:
    """A generator on ``device`` that continues ``generator``'s stream where that is possible.

    Returns ``generator`` itself when it already lives on ``device``. On another device of the same
    type (``cuda:0`` -> ``cuda:1``) the new generator takes the old state; across device types it is
    seeded with :func:`seed_from_state` of the old state (deterministic, not the same stream).
    """
    if generator.device == device:
        return generator
    moved = torch.Generator(device=device)
    state = generator.get_state()
    if generator.device.type == device.type:
        moved.set_state(state)
    else:
        moved.manual_seed(seed_from_state(state))
    return moved


def restore_generator_state(generator: torch.Generator, state: torch.Tensor, *, owner: str) -> bool:
    """Set ``generator``'s state to ``state`` (a saved ``get_state()``); True if it was restored.

    A state saved by a generator of another device type does not fit (the RNG state of a CUDA
    generator is not portable to a CPU generator, nor the reverse): then the generator is reseeded
    with :func:`seed_from_state` of the saved state, a ``RuntimeWarning`` naming ``owner`` is given
    (once per process for each size of foreign state and device type), and False is returned. A run
    resumed on another device type is therefore reproducible, but its random numbers differ from
    those of the run that was saved.
    """
    try:
        generator.set_state(state)
    except RuntimeError:
        size = int(state.numel())
        generator.manual_seed(seed_from_state(state))
        key = (size, generator.device.type)
        if key not in _warned_state_sizes:
            _warned_state_sizes.add(key)
            warnings.warn(
                f"{owner}: the saved RNG state ({size} bytes) was written by a generator on another "
                f"device type and does not fit the {generator.device.type} generator (the RNG state of a "
                f"CUDA generator is not portable); reseeded deterministically from the saved state.",
                RuntimeWarning,
                stacklevel=2,
            )
        return False
    return True

"""tshtrain: typed-parameter reinforcement-learning trainers for PyTorch and Gymnasium.

Import from the subpackages: ``tshtrain.trainer``, ``tshtrain.algorithm``, ``tshtrain.data``,
``tshtrain.env``, ``tshtrain.logger``. This top-level module stays light so that ``import tshtrain``
is fast.
"""

__version__ = "0.1.0"

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tshtrain.devices import resolve_device as resolve_device

__all__ = ["resolve_device"]


def __getattr__(name: str) -> Any:
    """``tshtrain.resolve_device`` (:func:`tshtrain.devices.resolve_device`), imported on first use so
    that ``import tshtrain`` does not import torch."""
    if name == "resolve_device":
        from tshtrain.devices import resolve_device

        return resolve_device
    raise AttributeError(f"module 'tshtrain' has no attribute {name!r}")

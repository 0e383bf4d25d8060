"""A count kept in a module's 0-dim integer buffer (so that it is in the ``state_dict``) and read and
advanced per env step as a plain Python int.

``int(buffer)`` and ``buffer.add_(n)`` cost a few µs each on the CPU (and a host sync / a kernel on
CUDA), which is much for bookkeeping on the collector's hot path (e.g. ``QValuePolicy``'s epsilon
schedule, once per env step). :class:`HostCount` mirrors the buffer in an int and writes the buffer
through a numpy view of its memory on the CPU (no torch op; ``fill_`` elsewhere, which launches a kernel
but never waits for the device). The buffer stays the truth for everyone else: a state_dict, a copy
between policies, a test reads it as before, and the mirror notices any torch write to the buffer (its
version counter moves: ``load_state_dict``, ``copy_``, ``fill_``) or a new buffer (``.to(device)``) and
reads it again.
"""

from __future__ import annotations

from typing import Any, final

import numpy as np
import torch


@final
class HostCount:
    """The Python-side mirror of one 0-dim integer buffer (see the module docstring)."""

    __slots__ = ("_tensor", "_value", "_version", "_view")

    def __init__(self) -> None:
        self._tensor: torch.Tensor | None = None  # the buffer mirrored (None: read it afresh)
        self._version = -1  # its version counter after the mirror's last read or write
        self._value = 0
        self._view: np.ndarray | None = None  # the buffer's memory as numpy (CPU only)

    def __reduce__(self) -> tuple[Any, ...]:
        # a copied or unpickled module mirrors its own buffer, read afresh (a deep-copied numpy view
        # would no longer share the copied buffer's memory)
        return (HostCount, ())

    def read(self, buffer: torch.Tensor) -> int:
        """The count in ``buffer``, from the mirror while nothing else wrote to the buffer."""
        # _version: torch's in-place write counter of a tensor (no public accessor; stable since 1.0)
        if buffer is self._tensor and buffer._version == self._version:
            return self._value
        return self._adopt(buffer)

    def add(self, buffer: torch.Tensor, amount: int) -> int:
        """Advance the count in ``buffer`` by ``amount``; returns the count before."""
        if buffer is self._tensor and buffer._version == self._version:
            before = self._value
        else:
            before = self._adopt(buffer)
        value = before + amount
        self._value = value
        view = self._view
        if view is not None:
            view[()] = value  # the buffer's memory, written without a torch op (its version stays)
        else:
            buffer.fill_(value)
            self._version = buffer._version if self._tensor is not None else -1
        return before

    def _adopt(self, buffer: torch.Tensor) -> int:
        self._value = int(buffer)
        if buffer.is_inference():  # no version counter to watch: read it every time
            self._tensor, self._view = None, None
            return self._value
        self._tensor, self._version = buffer, buffer._version
        cpu = buffer.device.type == "cpu" and not buffer.requires_grad
        self._view = buffer.numpy() if cpu else None
        return self._value

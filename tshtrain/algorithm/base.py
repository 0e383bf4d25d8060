"""The algorithm base contract: Policy, the three Algorithm families and TrainingStats.

* A :class:`Policy` maps observations to actions. It is what the collector runs and what you deploy.
* An :class:`Algorithm` owns a policy, the other networks it trains (critics, target networks) and
  their optimizers, and implements the update. Three abstract families fix the update's input:

  ================================  ============================================================
  :class:`OnPolicyAlgorithm`        ``update(rollout, batch_size=..., num_repetitions=...)``: the
                                    whole rollout of one collection step, mini-batched inside
  :class:`OffPolicyAlgorithm`       ``update(buffer, batch_size)``: one gradient step on a sample
                                    of the replay buffer
  :class:`OfflineAlgorithm`         ``update(buffer, batch_size)``: one gradient step on a sample
                                    of a fixed dataset
  ================================  ============================================================

  The trainer of the matching family calls ``update``; mypy rejects other pairings.
* Each update returns a frozen :class:`TrainingStats` subclass; ``num_gradient_steps`` reports how
  many optimizer steps it took (the trainer's gradient_step counter sums them).
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from itertools import chain
from typing import Any, Generic, Protocol, Self, TypeVar, final

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from typing_extensions import TypeVar as DefaultTypeVar

from tshtrain.algorithm.blocks.dataset_check import check_dataset_spaces
from tshtrain.algorithm.placement import move_to_device
from tshtrain.data.batch import (
    AnyRolloutBatch,
    AnyTransitionBatch,
    ObsArray,
    ObsTensor,
    obs_to_torch,
)
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.data.collector_base import AnyReplayBuffer
from tshtrain.devices import resolve_device, restore_generator_state
from tshtrain.env.multi_agent import ACTION_MASK_KEY
from tshtrain.env.spaces import action_spec
from tshtrain.errors import ConfigurationError, NonFiniteLossError


def check_finite_loss(algorithm: str, name: str, loss: torch.Tensor) -> None:
    """Raise :class:`NonFiniteLossError` if ``loss`` is NaN or infinite (one host sync)."""
    if not bool(torch.isfinite(loss).all()):
        raise NonFiniteLossError(
            f"{algorithm}: the {name} is {loss.detach().cpu().numpy()}; training stopped. Lower the "
            f"learning rate, clip gradients, or check the rewards and observations for NaN/inf."
        )


_CPU = torch.device("cpu")
_INFERENCE_MODE: Callable[[bool], AbstractContextManager[Any]] = getattr(
    torch._C, "_InferenceMode", torch.inference_mode
)
"""the guard that ``torch.inference_mode()`` enters, entered directly on the per-env-step path (0.4 µs
instead of 1.1 µs per use); ``torch.inference_mode`` where a torch build lacks it"""
_CLIP: Callable[..., np.ndarray] = getattr(getattr(np, "_core", np), "umath", np).clip
"""numpy's clip ufunc (``np.clip`` calls it through a Python wrapper; numpy < 2: ``np.clip`` itself)"""

FUSED_ADAM_DEVICE_TYPES = frozenset({"cpu", "cuda", "mps"})
"""device types with a fused Adam kernel in torch >= 2.4 (MPS: float32 and float16 parameters)"""


def fused_adam_supported(device: torch.device, dtype: torch.dtype = torch.float32) -> bool:
    """Whether Adam's fused kernel runs for parameters of ``dtype`` on ``device`` (MPS has no
    bfloat16 / float64 kernels in every supported torch version: those fall back to the loop)."""
    if device.type == "mps":
        return dtype in (torch.float32, torch.float16)
    return device.type in FUSED_ADAM_DEVICE_TYPES


def make_adam(params: Iterable[torch.nn.Parameter], *, lr: float, eps: float = 1e-8) -> torch.optim.Adam:
    """Adam with the fused kernel (about 1.5x faster steps than the per-tensor loop on CPU) where the
    parameters' device has one (:func:`fused_adam_supported`), else torch's default implementation.
    ``eps`` is Adam's denominator term (torch's default 1e-8)."""
    params = list(params)
    fused = all(fused_adam_supported(p.device, p.dtype) for p in params)
    return torch.optim.Adam(params, lr=lr, eps=eps, fused=True if fused else None)


def seeded_generator(seed: int | None, device: torch.device) -> torch.Generator:
    """A ``torch.Generator`` on ``device`` seeded from ``seed`` through ``np.random.SeedSequence``
    (None: fresh entropy), as every generator of an algorithm or policy is made."""
    generator = torch.Generator(device=device)
    return generator.manual_seed(int(np.random.SeedSequence(seed).generate_state(1)[0]))


def module_device(module: nn.Module) -> torch.device:
    """Device of ``module``'s first parameter (else first buffer; CPU if it has neither)."""
    for tensor in chain(module.parameters(), module.buffers()):
        return tensor.device
    return torch.device("cpu")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainingStats:
    """Statistics of one update. Subclasses add float fields (losses, entropies, ...)."""

    num_gradient_steps: int = 1
    """optimizer steps taken by the update"""

    def as_scalars(self) -> dict[str, float]:
        """Every numeric field except ``num_gradient_steps``, for loggers."""
        return {
            f.name: float(getattr(self, f.name))
            for f in dataclasses.fields(self)
            if f.name != "num_gradient_steps" and isinstance(getattr(self, f.name), int | float)
        }

    @classmethod
    def aggregate(cls, stats: Sequence[Self]) -> Self:
        """One record for several updates: float fields averaged, gradient steps summed."""
        if not stats:
            raise ValueError(f"{cls.__name__}.aggregate needs at least one record.")
        values: dict[str, Any] = {}
        for f in dataclasses.fields(stats[0]):
            column = [getattr(s, f.name) for s in stats]
            if f.name == "num_gradient_steps":
                values[f.name] = sum(column)
            elif isinstance(column[0], float):
                values[f.name] = math.fsum(column) / len(column)
            else:
                values[f.name] = column[-1]
        return type(stats[0])(**values)


def generator_states(owner: object) -> dict[str, Any]:
    """States of the ``torch.Generator`` / ``np.random.Generator`` attributes of ``owner`` by name."""
    states: dict[str, Any] = {}
    for name, value in vars(owner).items():
        if isinstance(value, torch.Generator):
            states[name] = value.get_state()
        elif isinstance(value, np.random.Generator):
            states[name] = value.bit_generator.state
    return states


def load_generator_states(owner: object, states: Mapping[str, Any]) -> None:
    """Restore what :func:`generator_states` returned (attributes not present are ignored). A torch
    generator state saved on another device type reseeds deterministically instead (see
    :func:`tshtrain.devices.restore_generator_state`)."""
    for name, saved in states.items():
        value = vars(owner).get(name)
        if isinstance(value, torch.Generator):
            restore_generator_state(value, saved, owner=f"{type(owner).__name__}.{name}")
        elif isinstance(value, np.random.Generator):
            value.bit_generator.state = dict(saved)


class Stateful(Protocol):
    """Anything with ``state_dict`` / ``load_state_dict`` (modules, optimizers, schedulers)."""

    def state_dict(self) -> Any: ...

    def load_state_dict(self, state_dict: Any, /) -> Any: ...


class UpdateHooks(Protocol):
    """What an algorithm calls inside its update so that a trainer's hooks act there.

    The trainer passes one to every ``update(..., hooks=...)`` call (see ``docs/hooks.md``); the
    default :data:`NO_UPDATE_HOOKS` does nothing. The algorithm never learns anything about the
    trainer through it.
    """

    def on_sampled_batch(self, batch: AnyTransitionBatch, /) -> AnyTransitionBatch:
        """Off-policy and offline algorithms pass every sampled batch through this before using it (a
        :class:`~tshtrain.data.TorchTransitionBatch` when sampled from a tensor buffer)."""
        ...

    def on_loss(self, losses: Mapping[str, torch.Tensor], /) -> None:
        """Called with the losses of a gradient step (name -> scalar tensor) before their backward
        pass. A hook may raise ``StopTraining`` here, which abandons the update."""
        ...

    def on_optimizer_step(self, name: str, optimizer: torch.optim.Optimizer, /) -> None:
        """Called right after every optimizer step; ``name`` is the optimizer's key in
        :meth:`Algorithm.components`."""
        ...


@final
class NoUpdateHooks:
    """The default :class:`UpdateHooks`: passes batches through, ignores losses and optimizer steps."""

    def on_sampled_batch(self, batch: AnyTransitionBatch, /) -> AnyTransitionBatch:
        return batch

    def on_loss(self, losses: Mapping[str, torch.Tensor], /) -> None:
        del losses

    def on_optimizer_step(self, name: str, optimizer: torch.optim.Optimizer, /) -> None:
        del name, optimizer


NO_UPDATE_HOOKS = NoUpdateHooks()
"""the update hooks of an update called without a trainer's hooks"""


class Policy(nn.Module, ABC):
    """Maps observations to actions; implements :class:`tshtrain.data.CollectorPolicy`.

    Box actions: the networks act in ``[-1, 1]`` per dimension and :meth:`map_action` maps that onto
    ``[low, high]`` linearly (``action_scaling=True``), after clipping to ``[-1, 1]``. Subclasses that
    squash (tanh) never leave the interval, so the clip is a no-op for them. Stored actions are the
    unmapped ones. Other action spaces are passed through unchanged.
    """

    def __init__(
        self,
        *,
        action_space: gym.Space[Any],
        observation_space: gym.Space[Any] | None = None,
        action_scaling: bool = True,
        deterministic_eval: bool = True,
        seed: int | None = None,
        device: torch.device | None = None,
    ):
        """Args:
        action_space: the env's single action space.
        observation_space: the env's single observation space (informational).
        action_scaling: map Box actions from [-1, 1] to the space's bounds (requires finite bounds).
        deterministic_eval: test steps use deterministic actions (argmax / mean).
        seed: seeds the policy's own torch generator used for sampling actions.
        device: where the policy's networks are (its generator is made there); None: CPU.
            Subclasses pass the device of the networks they are given (:func:`module_device`).
        """
        super().__init__()
        action_spec(action_space)  # raises for unsupported spaces
        self.action_space = action_space
        self.observation_space = observation_space
        self.deterministic_eval = deterministic_eval
        self.action_scaling = action_scaling and isinstance(action_space, gym.spaces.Box)
        if self.action_scaling:
            assert isinstance(action_space, gym.spaces.Box)
            if not (np.all(np.isfinite(action_space.low)) and np.all(np.isfinite(action_space.high))):
                raise ConfigurationError(
                    f"{type(self).__name__}: action_scaling=True needs finite Box bounds, got "
                    f"{action_space!r}; pass action_scaling=False."
                )
            self._act_low = np.asarray(action_space.low, dtype=np.float32)
            self._act_half = (np.asarray(action_space.high, dtype=np.float32) - self._act_low) / 2
        self._act_bounds_cache: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}
        self.generator = seeded_generator(seed, device or torch.device("cpu"))
        """the generator from which this policy samples actions (on the policy's device)"""
        self._device_tensor: tuple[torch.Tensor, ...] | None = None  # see _actions_device
        self.legal_actions: np.ndarray | None = None
        """the action mask (``obs["action_mask"]``, (N, num_actions), nonzero = legal) of the latest
        Dict observations :meth:`compute_actions` saw, for exploration noise that must stay legal;
        None for observations without one"""
        self.legal_actions_torch: torch.Tensor | None = None
        """the same for :meth:`compute_actions_torch`"""

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> Self:
        self._device_tensor = None  # .to() / .cuda() / ...: find the device afresh
        moved: Self = super()._apply(fn, recurse)  # type: ignore[no-untyped-call]  # torch leaves it untyped
        return moved

    def _actions_device(self) -> torch.device:
        """:attr:`device` without walking the modules on every call: the tensor that decides it (the
        first parameter, else buffer) is remembered, and its device read; moving the policy (any
        ``nn.Module._apply``: ``to``, ``cuda``, ...) forgets it. A parameter moved alone keeps its object
        (``param.data`` is replaced), so its device is still read right."""
        found = self._device_tensor
        if found is None:
            first = next(chain(self.parameters(), self.buffers()), None)
            found = self._device_tensor = () if first is None else (first,)
        return found[0].device if found else _CPU

    @property
    def device(self) -> torch.device:
        """Device of the policy's parameters (else buffers; CPU if it has neither); read from the
        remembered first tensor (see :meth:`_actions_device`), so the per-update reads cost no module walk."""
        return self._actions_device()

    @abstractmethod
    def actions(self, obs: ObsTensor, *, deterministic: bool) -> torch.Tensor:
        """Actions for a batch of observation tensors (called under ``torch.inference_mode``)."""

    def compute_actions(self, obs: ObsArray, *, deterministic: bool) -> np.ndarray:
        """Numpy in, numpy out: what the collector calls once per vector step."""
        found = self._device_tensor  # _actions_device(), inline on the per-env-step path
        device = found[0].device if found else self._actions_device()
        if (
            isinstance(obs, np.ndarray)
            and device.type == "cpu"
            and obs.dtype != np.float64
            and obs.flags.writeable
        ):
            obs_t: ObsTensor = torch.from_numpy(obs)  # what obs_to_torch does here, in a fraction of a µs
        else:
            if not isinstance(obs, np.ndarray):
                self.legal_actions = obs.get(ACTION_MASK_KEY)
            obs_t = obs_to_torch(obs, device)
        with _INFERENCE_MODE(True):
            act: torch.Tensor = self.actions(obs_t, deterministic=deterministic)
        return act.numpy() if act.device.type == "cpu" else act.cpu().numpy()

    def map_action(self, act: np.ndarray) -> np.ndarray:
        """Stored actions -> env actions (see the class docstring)."""
        if not self.action_scaling:
            return act
        # numpy's clip ufunc itself: np.clip's Python wrapper costs 1 µs per call (same values)
        return np.asarray(self._act_low + (_CLIP(act, -1.0, 1.0) + 1.0) * self._act_half, dtype=np.float32)

    def map_action_inverse(self, act: np.ndarray) -> np.ndarray:
        """Env actions -> stored actions."""
        if not self.action_scaling:
            return act
        return np.asarray((act - self._act_low) / self._act_half - 1.0, dtype=np.float32)

    def add_exploration_noise(self, act: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Exploration noise for training collection; none by default."""
        del rng
        return act

    def compute_noisy_actions(
        self, obs: ObsArray, rng: np.random.Generator, *, deterministic: bool
    ) -> np.ndarray:
        """What a collector with ``exploration_noise=True`` calls once per vector step:
        :meth:`compute_actions`, then :meth:`add_exploration_noise`. A policy may override it to skip
        work the noise makes useless (e.g. the network pass of an action that epsilon-greedy replaces),
        as long as it returns the same actions and draws the same random numbers from ``rng``."""
        return self.add_exploration_noise(self.compute_actions(obs, deterministic=deterministic), rng)

    # ------------------------------------------------------------------ the torch path
    # (what :class:`tshtrain.data.TensorCollector` calls; tensors stay on their device)
    def compute_actions_torch(self, obs: ObsTensor, *, deterministic: bool) -> torch.Tensor:
        """Tensors in, tensor out (under ``torch.inference_mode``); the observations are moved to the
        policy's device if they live elsewhere (a no-op when env and policy share it)."""
        obs = self._obs_on_device_torch(obs)
        with torch.inference_mode():
            act: torch.Tensor = self.actions(obs, deterministic=deterministic)
        return act

    def _obs_on_device_torch(self, obs: ObsTensor) -> ObsTensor:
        """``obs`` on the policy's device; remembers a Dict observation's action mask."""
        device = self.device
        if isinstance(obs, torch.Tensor):
            return obs.to(device)
        obs = {key: value.to(device) for key, value in obs.items()}
        self.legal_actions_torch = obs.get(ACTION_MASK_KEY)
        return obs

    def actions_with_log_prob(
        self, obs: ObsTensor, *, deterministic: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """:meth:`actions` and, where the policy can give it for free, log pi(act | obs) of the
        actions it sampled, shape (N,) (None otherwise, and for deterministic actions). The torch
        collector stores it, so that an on-policy update need not recompute it with a second actor
        pass over the rollout. The default gives None."""
        return self.actions(obs, deterministic=deterministic), None

    def compute_actions_log_prob_torch(
        self, obs: ObsTensor, *, deterministic: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """:meth:`compute_actions_torch` with :meth:`actions_with_log_prob`."""
        obs = self._obs_on_device_torch(obs)
        with torch.inference_mode():
            return self.actions_with_log_prob(obs, deterministic=deterministic)

    def map_action_torch(self, act: torch.Tensor) -> torch.Tensor:
        """:meth:`map_action` on tensors."""
        if not self.action_scaling:
            return act
        low, half = self._act_bounds_torch(act.device)
        return low + (act.clamp(-1.0, 1.0) + 1.0) * half

    def map_action_inverse_torch(self, act: torch.Tensor) -> torch.Tensor:
        """:meth:`map_action_inverse` on tensors."""
        if not self.action_scaling:
            return act
        low, half = self._act_bounds_torch(act.device)
        return ((act - low) / half - 1.0).to(torch.float32)

    def add_exploration_noise_torch(self, act: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """:meth:`add_exploration_noise` on tensors, drawing from ``generator`` (on ``act``'s device);
        none by default."""
        del generator
        return act

    def _act_bounds_torch(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """The Box bounds' low end and half width as float32 tensors on ``device`` (cached)."""
        cached = self._act_bounds_cache.get(device)
        if cached is None:
            low = torch.as_tensor(self._act_low, device=device)
            half = torch.as_tensor(self._act_half, device=device)
            cached = self._act_bounds_cache[device] = (low, half)
        return cached


TPolicy = TypeVar("TPolicy", bound=Policy)
TStats_co = DefaultTypeVar("TStats_co", bound=TrainingStats, covariant=True, default=TrainingStats)
"""the statistics an algorithm's update returns; ``Algorithm[P]`` means ``Algorithm[P, TrainingStats]``"""


class Algorithm(ABC, Generic[TPolicy, TStats_co]):
    """Owns a policy, further networks and optimizers; implements the update (see module docstring)."""

    def __init__(self, *, policy: TPolicy):
        self.policy = policy
        self._components: dict[str, Stateful] = {"policy": policy}

    def register_components(self, components: Mapping[str, Stateful]) -> None:
        """Declare further components to save, by name (called in ``__init__``); the names are the
        keys of :meth:`state_dict`. Registering another object under a taken name is a bug."""
        for name, component in components.items():
            taken = self._components.get(name)
            assert taken is None or taken is component, f"component {name!r} registered twice"
            self._components[name] = component

    def components(self) -> dict[str, Stateful]:
        """Everything with state to save: networks, optimizers, schedulers: the policy and what
        :meth:`register_components` declared, in that order."""
        return dict(self._components)

    @property
    def device(self) -> torch.device:
        """The device of the algorithm's networks: that of its policy's parameters."""
        return self.policy.device

    def close(self) -> None:
        """Release what the algorithm holds outside this process (worker processes); the trainer calls
        it when a run ends. A no-op here; the next update may start such resources again."""

    def to(self, device: str | torch.device) -> Self:
        """Move every tensor and generator the algorithm owns to ``device`` (``auto``, ``cpu``,
        ``cuda``, ``cuda:N``, ``mps`` or a ``torch.device``, see
        :func:`tshtrain.devices.resolve_device`); returns the algorithm.

        Modules (policy, critics, target networks, normalisers) move with ``nn.Module.to``, so their
        parameters stay the same objects and the optimizers keep working; optimizer state tensors
        follow their parameters; learning-rate schedulers are untouched. Every ``torch.Generator``
        attribute of the algorithm, its policy and the blocks they hold is replaced by one on the
        device (continuing the stream on the same device type; across types seeded deterministically
        from the old state: :func:`tshtrain.devices.move_generator`). What is already on ``device``
        is left as it is, so ``to("cpu")`` changes nothing in a CPU run. See ``docs/gpu.md``.
        """
        target = resolve_device(device)
        move_to_device([self, *self.components().values()], target, fused_ok=fused_adam_supported(target))
        return self

    def extra_state(self) -> dict[str, Any]:
        """Plain values to save besides the components (e.g. an update counter)."""
        return {}

    def load_extra_state(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`extra_state` returned."""
        del state

    def state_dict(self) -> dict[str, Any]:
        """State of every component (weights, optimizers, ...), the extra state, and the states of the
        random generators held by the algorithm and its policy (attributes that are a
        ``torch.Generator`` or ``np.random.Generator``), so that a restored algorithm draws the same
        numbers."""
        state: dict[str, Any] = {name: comp.state_dict() for name, comp in self.components().items()}
        state["_extra"] = self.extra_state()
        state["_generators"] = {
            "algorithm": generator_states(self),
            "policy": generator_states(self.policy),
        }
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict`; the component names must match exactly."""
        components = self.components()
        missing = set(components) - set(state)
        unexpected = set(state) - set(components) - {"_extra", "_generators"}
        if missing or unexpected:
            raise ConfigurationError(
                f"{type(self).__name__}.load_state_dict: missing {sorted(missing)}, unexpected "
                f"{sorted(unexpected)}; was the state saved from another algorithm?"
            )
        for name, comp in components.items():
            comp.load_state_dict(state[name])
        self.load_extra_state(state.get("_extra", {}))
        generators = state.get("_generators", {})
        load_generator_states(self, generators.get("algorithm", {}))
        load_generator_states(self.policy, generators.get("policy", {}))


class OnPolicyAlgorithm(Algorithm[TPolicy, TStats_co]):
    """Updates from the rollout of the latest collection step only; the trainer then clears the buffer."""

    @abstractmethod
    def update(
        self,
        rollout: AnyRolloutBatch,
        *,
        batch_size: int | None,
        num_repetitions: int,
        hooks: UpdateHooks = NO_UPDATE_HOOKS,
    ) -> TStats_co:
        """``num_repetitions`` passes over ``rollout`` (numpy or tensor) in mini-batches of ``batch_size``
        (None: all);
        ``hooks`` are called at their points inside (see :class:`UpdateHooks`)."""


class OffPolicyAlgorithm(Algorithm[TPolicy, TStats_co]):
    """Updates from samples of a replay buffer that the training collector fills (a numpy buffer, or a
    :class:`~tshtrain.data.TensorReplayBuffer` on the torch path)."""

    defers_stats: bool = False
    """True inside :meth:`deferring_stats`: updates may return records whose scalars are still tensors
    (:mod:`tshtrain.algorithm.pending_stats`)"""

    @contextmanager
    def deferring_stats(self) -> Iterator[None]:
        """Inside the block, :meth:`update` may leave its statistics unresolved until
        :func:`~tshtrain.algorithm.pending_stats.resolve_stats` (the off-policy trainer's update step:
        one host transfer for all its gradient steps instead of one per gradient step)."""
        previous, self.defers_stats = self.defers_stats, True
        try:
            yield
        finally:
            self.defers_stats = previous

    @abstractmethod
    def update(
        self, buffer: AnyReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> TStats_co:
        """One gradient step on ``batch_size`` transitions sampled from ``buffer``; ``hooks`` are called
        at their points inside (see :class:`UpdateHooks`)."""


class OfflineAlgorithm(Algorithm[TPolicy, TStats_co]):
    """Updates from samples of a fixed dataset; never collects."""

    def process_buffer(self, buffer: BaseReplayBuffer) -> None:
        """Called once before offline training (e.g. to compute dataset statistics)."""
        del buffer

    def check_dataset(self, buffer: BaseReplayBuffer, observation_space: gym.Space[Any] | None) -> None:
        """Raise if ``buffer`` does not fit the env: observation shapes against ``observation_space``
        (default: the policy's, if it knows one), actions against the policy's action space (see
        :mod:`tshtrain.algorithm.blocks.dataset_check`). The offline trainer calls it when it is built.

        Raises:
            ConfigurationError: one line naming the dataset (``buffer.source``), the field, the value
                and what the env expects.
        """
        check_dataset_spaces(
            buffer,
            observation_space=observation_space or self.policy.observation_space,
            action_space=self.policy.action_space,
            name=buffer.source or "OfflineTrainerParams.buffer",
        )

    @abstractmethod
    def update(
        self, buffer: BaseReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> TStats_co:
        """One gradient step on ``batch_size`` transitions sampled from ``buffer``; ``hooks`` are called
        at their points inside (see :class:`UpdateHooks`)."""

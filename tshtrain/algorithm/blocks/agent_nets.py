"""Networks for agent columns (:mod:`tshtrain.env.multi_agent`): MAPPO and IPPO with parameter sharing.

A column observation is the agent's observation array, or a flat Dict with ``obs`` (the agent's own
observation), ``state`` (the env's global state), ``agent_id`` (one-hot) and ``action_mask``. The
actor of a shared policy sees ``obs`` and ``agent_id``; MAPPO's centralised critic sees ``state`` and
``agent_id``, IPPO's critic what the actor sees. :class:`SelectKeys` hands each network its keys, and
:func:`mappo_actor_critic` builds the pair for :class:`~tshtrain.algorithm.PPO` (or A2C), and
:func:`agent_q_network` an agent's Q-network for value decomposition (VDN, QMIX). Parameter
sharing is then one PPO over all columns: its rollout holds every agent's transitions. With
``critic_per_world=True`` MAPPO's critic is a :class:`~tshtrain.algorithm.blocks.world_critic.PerWorldCritic`
(``state`` only, one row per world, one output per agent; importable from here too).

``action_mask`` is never an input of these networks (masking acts on the logits, not on features).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, final

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.blocks.encoders import Encoder, accepts_dict_obs, input_encoder, obs_encoder
from tshtrain.algorithm.blocks.gaussian import GaussianPolicy
from tshtrain.algorithm.blocks.multi_policies import BernoulliPolicy, MultiCategoricalPolicy
from tshtrain.algorithm.blocks.nets import mlp
from tshtrain.algorithm.blocks.onpolicy import ActorPolicy
from tshtrain.algorithm.blocks.policies import CategoricalPolicy
from tshtrain.algorithm.blocks.world_critic import PerWorldCritic
from tshtrain.data.batch import ObsTensor
from tshtrain.env.multi_agent import AGENT_ID_KEY, OBS_KEY, STATE_KEY
from tshtrain.errors import ConfigurationError, UnsupportedSpaceError


@final
class SelectKeys(Encoder):
    """Passes the ``keys`` of a Dict observation to ``net``: the tensor of the key itself when there is
    one key (so ``net`` may take arrays), a dict of the keys otherwise (``net`` must take dicts, e.g. a
    :class:`~tshtrain.algorithm.blocks.encoders.DictEncoder`). Other keys (``action_mask``, the other
    network's inputs) are dropped.

    It is an :class:`~tshtrain.algorithm.blocks.encoders.Encoder` (taking dicts), so that policies see
    a network that accepts Dict observations and can check its output size: ``output_dim`` is
    ``net.output_dim`` when ``net`` has one, else the width of its last ``nn.Linear``.
    """

    accepts_dict_obs = True

    def __init__(self, net: nn.Module, keys: Sequence[str]):
        """Args:
        net: the network fed with the selected keys.
        keys: the keys to pass, at least one, no repeats.

        Raises:
            ConfigurationError: no keys or repeated keys; several keys for a ``net`` that does not
                accept dicts (see :func:`~tshtrain.algorithm.blocks.encoders.accepts_dict_obs`).
        """
        super().__init__()
        selected = tuple(str(key) for key in keys)
        if not selected or len(set(selected)) != len(selected):
            raise ConfigurationError(
                f"SelectKeys.keys must be distinct keys, at least one, got {list(keys)}."
            )
        if len(selected) > 1 and not accepts_dict_obs(net):
            raise ConfigurationError(
                f"SelectKeys: {type(net).__name__} takes arrays, but keys {list(selected)} are passed as a "
                "dict; build it on a DictEncoder (tshtrain.algorithm.obs_encoder(Dict space)) or select one "
                "key."
            )
        self.net = net
        self.keys = selected
        self.output_dim = _output_dim(net)

    @override
    def forward(self, obs: ObsTensor) -> torch.Tensor:
        if not isinstance(obs, Mapping):
            raise UnsupportedSpaceError(
                f"SelectKeys({list(self.keys)}): got an array observation; it takes Dict observations "
                "(build the env with the keys, e.g. VmasEnv(..., agent_layout='columns', agent_id=True))."
            )
        missing = [key for key in self.keys if key not in obs]
        if missing:
            raise UnsupportedSpaceError(
                f"SelectKeys: the observation has keys {sorted(obs)}, missing {missing} of {list(self.keys)}."
            )
        picked: ObsTensor = obs[self.keys[0]] if len(self.keys) == 1 else {k: obs[k] for k in self.keys}
        out: torch.Tensor = self.net(picked)
        return out

    @override
    def zero_obs(self, device: torch.device) -> dict[str, torch.Tensor]:
        """Zero observations of the selected keys (from ``net``'s input encoder; NotImplementedError
        when it has none)."""
        encoder = input_encoder(self.net)
        if encoder is None:
            raise NotImplementedError(f"SelectKeys: {type(self.net).__name__} has no input encoder")
        zeros = encoder.zero_obs(device)
        if isinstance(zeros, torch.Tensor):
            return {self.keys[0]: zeros}
        return dict(zeros)


def _output_dim(net: nn.Module) -> int:
    dim = getattr(net, "output_dim", None)
    if isinstance(dim, int):
        return dim
    last = [m for m in net.modules() if isinstance(m, nn.Linear)]
    return int(last[-1].out_features) if last else 0


def _input_keys(space: gym.spaces.Dict, wanted: Sequence[str], owner: str) -> list[str]:
    present = [key for key in wanted if key in space.spaces]
    if not present:
        raise UnsupportedSpaceError(
            f"{owner}: the observation space {space} has none of the keys {list(wanted)}."
        )
    return present


def _keyed_network(
    space: gym.Space[Any],
    keys: Sequence[str] | None,
    output_dim: int,
    hidden_sizes: Sequence[int],
    activation: type[nn.Module],
) -> nn.Module:
    """An MLP to ``output_dim`` on the ``keys`` of a Dict ``space`` (None: on the whole array space)."""
    if keys is None:
        encoder: Encoder = obs_encoder(space)
    else:
        assert isinstance(space, gym.spaces.Dict)
        sub: gym.Space[Any] = (
            space.spaces[keys[0]] if len(keys) == 1 else gym.spaces.Dict({k: space.spaces[k] for k in keys})
        )
        encoder = SelectKeys(obs_encoder(sub), keys)
    return nn.Sequential(encoder, mlp(encoder.output_dim, output_dim, hidden_sizes, activation))


def mappo_actor_critic(
    observation_space: gym.Space[Any],
    action_space: gym.Space[Any],
    *,
    hidden_sizes: Sequence[int] = (64, 64),
    critic_hidden_sizes: Sequence[int] | None = None,
    activation: type[nn.Module] = nn.Tanh,
    centralised_critic: bool = True,
    critic_per_world: bool = False,
    num_agents: int | None = None,
    use_agent_id: bool = True,
    init_log_std: float = 0.0,
    device: str | torch.device = "cpu",
    seed: int | None = None,
) -> tuple[ActorPolicy, nn.Module]:
    """The policy and critic of MAPPO (``centralised_critic=True``) or IPPO (False) on agent columns.

    The actor takes ``obs`` (+ ``agent_id`` if the space has it and ``use_agent_id``); the critic takes
    ``state`` (+ ``agent_id``) for MAPPO, the actor's inputs for IPPO. For an array observation space
    (no keys) both take the array (IPPO only). ``action_mask`` and other keys are not inputs. Give the
    pair to :class:`~tshtrain.algorithm.PPO` (``PPO(policy=policy, critic=critic, ...)``): one PPO over
    all columns shares the parameters among the agents.

    With ``critic_per_world=True`` (MAPPO only) the critic is a :class:`PerWorldCritic`: an MLP on
    ``state`` alone with one output per agent, evaluated once per world step instead of once per agent
    column (A times fewer critic rows; BenchMARL's shared centralised critic is of this kind). The PPO
    update then samples mini-batches of whole world steps; its rollout must hold all A agents of each
    world, agent-major (one PPO over a ``VmasEnv(agent_layout="columns")`` or a ``shared_learner``
    over every agent), and ``batch_size`` must be a multiple of A.

    Args:
        observation_space: one column's observation space (the env's ``single_observation_space``).
        action_space: one column's action space: Discrete (categorical policy), Box (Gaussian),
            MultiDiscrete (multi-categorical) or MultiBinary (Bernoulli).
        hidden_sizes: the actor's MLP layers.
        critic_hidden_sizes: the critic's MLP layers; None: ``hidden_sizes``.
        activation: activation of both MLPs.
        centralised_critic: the critic sees the global ``state`` (MAPPO) instead of the agent's ``obs``.
        critic_per_world: the critic reads ``state`` once per world and returns the values of the
            world's agents (needs ``centralised_critic``); False: once per agent, on ``state`` +
            ``agent_id``.
        num_agents: A, the agents per world, for ``critic_per_world``; None: the width of the
            ``agent_id`` key (given as well, the two must agree).
        use_agent_id: feed ``agent_id`` to both networks when the space has it.
        init_log_std: the Gaussian policy's initial log standard deviation (Box actions).
        device: where the networks live.
        seed: seeds the policy's generator.

    Returns:
        (policy, critic).

    Raises:
        UnsupportedSpaceError: MAPPO without a ``state`` key, a Dict space without ``obs``, an
            unsupported action space.
        ConfigurationError: ``critic_per_world`` without ``centralised_critic`` or without a number of
            agents (no ``num_agents``, no ``agent_id`` key), ``num_agents`` disagreeing with
            ``agent_id`` or given without ``critic_per_world``.
    """
    owner = "mappo_actor_critic"
    critic_hidden = tuple(hidden_sizes if critic_hidden_sizes is None else critic_hidden_sizes)
    id_keys = [AGENT_ID_KEY] if use_agent_id else []
    actor_keys: list[str] | None
    critic_keys: list[str] | None
    if isinstance(observation_space, gym.spaces.Dict):
        if OBS_KEY not in observation_space.spaces:
            raise UnsupportedSpaceError(
                f"{owner}: the observation space {observation_space} has no {OBS_KEY!r} key (the agent's "
                "own observation)."
            )
        actor_keys = _input_keys(observation_space, [OBS_KEY, *id_keys], owner)
        if centralised_critic and STATE_KEY not in observation_space.spaces:
            raise UnsupportedSpaceError(
                f"{owner}: centralised_critic=True needs a {STATE_KEY!r} key in the observation space, got "
                f"{observation_space}; build the env with a global state (e.g. VmasEnv(..., "
                "global_state=True)) or use centralised_critic=False (IPPO)."
            )
        critic_keys = (
            _input_keys(observation_space, [STATE_KEY, *id_keys], owner) if centralised_critic else actor_keys
        )
    else:
        if centralised_critic:
            raise UnsupportedSpaceError(
                f"{owner}: centralised_critic=True needs a Dict observation space with a {STATE_KEY!r} key, "
                f"got {observation_space}; build the env with a global state or use "
                "centralised_critic=False (IPPO)."
            )
        actor_keys = critic_keys = None
    world_agents = _world_agents(observation_space, centralised_critic, num_agents) if critic_per_world else 0
    if num_agents is not None and not critic_per_world:
        raise ConfigurationError(
            f"{owner}: num_agents={num_agents} is only used with critic_per_world=True; drop it or set "
            "critic_per_world=True."
        )

    def actor(output_dim: int) -> nn.Module:
        return _keyed_network(observation_space, actor_keys, output_dim, hidden_sizes, activation).to(device)

    policy = _policy(action_space, actor, init_log_std=init_log_std, seed=seed)
    if critic_per_world:
        world_net = _keyed_network(observation_space, [STATE_KEY], world_agents, critic_hidden, activation)
        return policy, PerWorldCritic(world_net, world_agents).to(device)
    critic = _keyed_network(observation_space, critic_keys, 1, critic_hidden, activation).to(device)
    return policy, critic


def agent_q_network(
    observation_space: gym.Space[Any],
    action_space: gym.Space[Any],
    *,
    hidden_sizes: Sequence[int] = (64, 64),
    activation: type[nn.Module] = nn.ReLU,
    use_agent_id: bool = True,
    device: str | torch.device = "cpu",
) -> nn.Module:
    """An agent's Q-network for value decomposition (VDN, QMIX): an MLP from ``obs`` (+ ``agent_id`` if
    the space has it and ``use_agent_id``) to one value per action. For an array observation space it
    reads the array. ``state`` and ``action_mask`` are not inputs (the mixer reads the state). Give it
    to a :class:`~tshtrain.algorithm.QValuePolicy`; one policy for every agent shares the network.

    Raises:
        UnsupportedSpaceError: a Dict space without ``obs``; an action space that is not Discrete.
    """
    owner = "agent_q_network"
    if not isinstance(action_space, gym.spaces.Discrete):
        raise UnsupportedSpaceError(
            f"{owner}: value decomposition needs a Discrete action space, got {action_space!r}."
        )
    keys: list[str] | None = None
    if isinstance(observation_space, gym.spaces.Dict):
        if OBS_KEY not in observation_space.spaces:
            raise UnsupportedSpaceError(
                f"{owner}: the observation space {observation_space} has no {OBS_KEY!r} key (the agent's "
                "own observation)."
            )
        keys = _input_keys(observation_space, [OBS_KEY, *([AGENT_ID_KEY] if use_agent_id else [])], owner)
    net = _keyed_network(observation_space, keys, int(action_space.n), hidden_sizes, activation)
    return net.to(device)


def _world_agents(space: gym.Space[Any], centralised_critic: bool, num_agents: int | None) -> int:
    """The number of agents of a per-world critic (``mappo_actor_critic``'s checks, see there)."""
    owner = "mappo_actor_critic"
    if not centralised_critic:
        raise ConfigurationError(
            f"{owner}: critic_per_world=True needs centralised_critic=True (a per-world critic reads the "
            "world's state, one row per world); IPPO's critic sees each agent's own observation."
        )
    assert isinstance(space, gym.spaces.Dict)  # checked with the state key
    id_space = space.spaces.get(AGENT_ID_KEY)
    id_width = None if id_space is None or id_space.shape is None else int(np.prod(id_space.shape))
    if num_agents is None and id_width is None:
        raise ConfigurationError(
            f"{owner}: critic_per_world=True needs the number of agents: pass num_agents=A or build the "
            f"env with an {AGENT_ID_KEY!r} key (e.g. agent_id=True); the space is {space}."
        )
    if num_agents is not None and id_width is not None and num_agents != id_width:
        raise ConfigurationError(
            f"{owner}: num_agents={num_agents}, but the {AGENT_ID_KEY!r} key is one-hot over {id_width} "
            "agents; drop num_agents or make them agree."
        )
    return num_agents if num_agents is not None else int(id_width or 0)


def _policy(
    action_space: gym.Space[Any],
    actor: Callable[[int], nn.Module],
    *,
    init_log_std: float,
    seed: int | None,
) -> ActorPolicy:
    """The policy of ``action_space`` on ``actor(number of outputs)``."""
    if isinstance(action_space, gym.spaces.Discrete):
        return CategoricalPolicy(actor(int(action_space.n)), action_space, seed=seed)
    if isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1:
        return GaussianPolicy(
            actor(int(action_space.shape[0])), action_space, init_log_std=init_log_std, seed=seed
        )
    if isinstance(action_space, gym.spaces.MultiDiscrete):
        return MultiCategoricalPolicy(actor(int(action_space.nvec.sum())), action_space, seed=seed)
    if isinstance(action_space, gym.spaces.MultiBinary):
        return BernoulliPolicy(actor(int(np.prod(action_space.shape or ()))), action_space, seed=seed)
    raise UnsupportedSpaceError(
        f"mappo_actor_critic: a Discrete, one-dimensional Box, MultiDiscrete or MultiBinary action space is "
        f"needed, got {action_space!r}."
    )

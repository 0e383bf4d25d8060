"""VDN and QMIX from experiment files: team algorithms built once over every agent (``agents.layout:
shared``), on one agent column's spaces; the file's epsilon decay counts env steps; what they do not
support is refused at build time, naming the field and the value."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from tshtrain.algorithm.blocks.mixers import QMixer, SumMixer
from tshtrain.algorithm.value_decomposition import TeamReward, ValueDecomposition
from tshtrain.config import build_algorithm, default_experiment_data, resolve_experiment
from tshtrain.config.agents import build_multi_agent_algorithm
from tshtrain.config.files import merge_data
from tshtrain.errors import ExperimentError

AGENTS = ("agent_0", "agent_1", "agent_2")


def _spaces(state: bool = True) -> tuple[gym.spaces.Dict, gym.spaces.Discrete]:
    keys: dict[str, gym.Space[Any]] = {
        "obs": gym.spaces.Box(-np.inf, np.inf, (18,), np.float32),
        "agent_id": gym.spaces.Box(0.0, 1.0, (3,), np.float32),
    }
    if state:
        keys["state"] = gym.spaces.Box(-np.inf, np.inf, (54,), np.float32)
    return gym.spaces.Dict(keys), gym.spaces.Discrete(5)


def _experiment(name: str, **changes: Any) -> Any:
    return resolve_experiment(merge_data(default_experiment_data(name), changes), "test")


@pytest.mark.parametrize(("name", "mixer"), [("vdn", SumMixer), ("qmix", QMixer)])
def test_the_default_experiment_builds_one_team_algorithm_over_every_agent(name: str, mixer: type) -> None:
    obs_space, act_space = _spaces()
    built = build_multi_agent_algorithm(_experiment(name), obs_space, act_space, AGENTS)
    assert isinstance(built, ValueDecomposition) and isinstance(built.mixer, mixer)
    assert built.num_agents == 3 and len(built.q_policies) == 1  # one network shared by the agents
    assert built.params.gamma == 0.9 and built.params.team_reward is TeamReward.MEAN
    policy = built.q_policies[0]
    # the file's eps_decay_env_steps counts env steps; the shared policy counts 3 actions per env step
    assert policy.eps_schedule.num_env_steps == 30_000 * 3
    if name == "qmix":
        assert isinstance(built.mixer, QMixer) and built.mixer.embed_dim == 32


def test_qmix_without_a_global_state_names_the_env_key() -> None:
    obs_space, act_space = _spaces(state=False)
    with pytest.raises(ExperimentError, match=r"qmix.*'state' key.*set env.global_state: true"):
        build_multi_agent_algorithm(_experiment("qmix"), obs_space, act_space, AGENTS)


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        (
            {"agents": {"layout": "independent"}},
            r"agents.layout: vdn trains every agent as one team.*use layout shared, got 'independent'",
        ),
        ({"buffer": {"prioritized": True}}, r"buffer.prioritized: 'true' is not supported by vdn"),
    ],
)
def test_unsupported_layouts_and_buffers_are_refused(changes: dict[str, Any], match: str) -> None:
    obs_space, act_space = _spaces()
    with pytest.raises(ExperimentError, match=match):
        build_multi_agent_algorithm(_experiment("vdn", **changes), obs_space, act_space, AGENTS)


def test_built_without_the_env_agents_it_names_the_fix() -> None:
    """``build_algorithm`` (the single-agent path) gives the builder no agents."""
    obs_space, act_space = _spaces()
    with pytest.raises(ExperimentError, match=r"vdn trains the agents of a multi-agent env as one team"):
        build_algorithm(_experiment("vdn"), obs_space, act_space)


def test_team_reward_is_read_by_its_value() -> None:
    obs_space, act_space = _spaces()
    experiment = _experiment("vdn", algorithm={"params": {"team_reward": "sum"}})
    built = build_multi_agent_algorithm(experiment, obs_space, act_space, AGENTS)
    assert isinstance(built, ValueDecomposition) and built.params.team_reward is TeamReward.SUM
    with pytest.raises(ExperimentError, match=r"team_reward"):
        _experiment("vdn", algorithm={"params": {"team_reward": "max"}})

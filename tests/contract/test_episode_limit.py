"""A test step on an env that never ends an episode raises a clear error instead of hanging."""

from __future__ import annotations

import pytest

from tests.contract._hook_setups import RandomPolicy, off_policy_trainer
from tests.contract.conftest import counting_vector_env
from tshtrain.data import Collector
from tshtrain.errors import EpisodeLimitError
from tshtrain.trainer import TrainerParams


def test_collect_episodes_stops_at_its_bound_naming_the_sub_envs() -> None:
    envs = counting_vector_env([3, 10**9])  # sub-env 1 never finishes an episode in time
    collector = Collector(RandomPolicy(envs.single_action_space, seed=0), envs, seed=0)
    with pytest.raises(
        EpisodeLimitError, match=r"100 env steps without finishing 2 episodes .* sub-envs \[1\]"
    ):
        collector.collect(n_episode=2, max_env_steps=100)


def test_the_bound_does_not_cut_episodes_that_end_in_time() -> None:
    envs = counting_vector_env([5, 5])
    collector = Collector(RandomPolicy(envs.single_action_space, seed=0), envs, seed=0)
    stat = collector.collect(n_episode=4, max_env_steps=20)  # exactly 20 env steps
    assert stat.n_collected_episodes == 4 and stat.n_collected_steps == 20


def test_a_test_step_on_an_endless_env_raises_with_the_bound() -> None:
    trainer = off_policy_trainer(
        env_factory=lambda: counting_vector_env([10**9]), test_step_max_env_steps=50, max_epochs=1
    )
    with pytest.raises(EpisodeLimitError, match=r"50 env steps without finishing 1 episodes"):
        trainer.run()


def test_the_bound_is_validated() -> None:
    with pytest.raises(ValueError, match=r"test_step_max_env_steps"):
        TrainerParams(test_step_max_env_steps=0)

"""A test step on an env that never ends an episode raises a clear error instead of hanging, and says
what it is doing long before that (one warning after ``QUIET_EPISODE_ENV_STEPS`` quiet env steps)."""

from __future__ import annotations

import logging

import pytest

from tests.contract._hook_setups import RandomPolicy, off_policy_trainer
from tests.contract.conftest import counting_vector_env
from tshtrain.data import Collector, collector_base
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


QUIET = "no episode has ended yet; the env may never end an episode"


def _quiet_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if QUIET in r.getMessage() and r.levelname == "WARNING"]


@pytest.mark.parametrize("num_envs", [1, 2])
def test_an_endless_env_is_named_once_long_before_the_bound(
    num_envs: int, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """1 env (the single-env path) and 2 (the vector path): one warning after 30 quiet env steps each,
    then the bound's error; nothing is timed."""
    monkeypatch.setattr(collector_base, "QUIET_EPISODE_ENV_STEPS", 30)
    envs = counting_vector_env([10**9] * num_envs)
    collector = Collector(RandomPolicy(envs.single_action_space, seed=0), envs, seed=0)
    with caplog.at_level(logging.WARNING), pytest.raises(EpisodeLimitError):
        collector.collect(n_episode=num_envs, max_env_steps=200)
    assert _quiet_warnings(caplog) == [
        f"Collector.collect(n_episode={num_envs}): 30 env steps on each sub-env and {QUIET}: give it a "
        "time limit (env.kwargs.max_episode_steps in an experiment file, gymnasium.wrappers.TimeLimit in "
        "code); it stops with an error at max_env_steps=200 (a trainer's test step: "
        "trainer.test_step_max_env_steps)."
    ]


def test_episodes_that_end_keep_it_quiet(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(collector_base, "QUIET_EPISODE_ENV_STEPS", 6)
    envs = counting_vector_env([5, 5, 5])  # 3 envs x 5 steps: 15 env steps, never 6 quiet vector steps
    collector = Collector(RandomPolicy(envs.single_action_space, seed=0), envs, seed=0)
    with caplog.at_level(logging.WARNING):
        collector.collect(n_episode=6)
    assert _quiet_warnings(caplog) == []


def test_a_test_step_on_an_endless_env_says_so_before_its_bound(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(collector_base, "QUIET_EPISODE_ENV_STEPS", 20)
    trainer = off_policy_trainer(
        env_factory=lambda: counting_vector_env([10**9]), test_step_max_env_steps=50, max_epochs=1
    )
    with caplog.at_level(logging.WARNING), pytest.raises(EpisodeLimitError):
        trainer.run()
    (warning,) = _quiet_warnings(caplog)
    assert "20 env steps on each sub-env" in warning and "trainer.test_step_max_env_steps" in warning

"""Build an experiment's algorithm section into an algorithm with fresh networks.

:func:`build_algorithm` builds the experiment's one algorithm; :func:`build_section` builds any
algorithm section (the top-level one, or a learner's of the ``agents`` section) on given spaces.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch

from tshtrain.algorithm.base import Algorithm
from tshtrain.algorithm.blocks.schedules import num_update_steps_for
from tshtrain.config.builders import BuildContext
from tshtrain.config.models import AlgorithmConfig, EpsilonGreedy, Experiment, GaussianNoise
from tshtrain.config.registry import Family, get_spec
from tshtrain.config.resolve import build_params
from tshtrain.config.sections import Section
from tshtrain.devices import resolve_device
from tshtrain.errors import ConfigurationError, ExperimentError


def experiment_device(experiment: Experiment) -> torch.device:
    """The experiment's ``device``, checked against the machine (an ExperimentError otherwise)."""
    try:
        return resolve_device(experiment.device)
    except ConfigurationError as error:
        raise ExperimentError(str(error)) from None


def build_algorithm(
    experiment: Experiment,
    observation_space: gym.Space[Any],
    action_space: gym.Space[Any],
    *,
    world_size: int = 1,
) -> Algorithm[Any]:
    """The algorithm of a resolved experiment, with fresh networks (seeded from ``experiment.seed``),
    built on the CPU (the same initial weights on every device) and moved to ``experiment.device``;
    ``world_size``: the ranks of a data-parallel run (its ``"linear"`` schedules count the update steps
    of all ranks' collection together)."""
    device = experiment_device(experiment)
    torch.manual_seed(experiment.seed)
    algorithm = build_section(
        experiment.algorithm,
        observation_space,
        action_space,
        seed=experiment.seed,
        num_update_steps=num_update_steps(experiment, experiment.algorithm, world_size=world_size),
        env_id=experiment.env.id,
    )
    return algorithm.to(device)


def build_section(
    section: AlgorithmConfig,
    observation_space: gym.Space[Any],
    action_space: gym.Space[Any],
    *,
    seed: int,
    num_update_steps: int = 1,
    env_id: str = "",
    where: str = "",
    explore: bool = True,
    agents: tuple[str, ...] = (),
) -> Algorithm[Any]:
    """The algorithm of a resolved algorithm section on the CPU (the caller seeds torch).

    Args:
        section: a resolved algorithm section.
        observation_space: one env's (or agent column's) observation space.
        action_space: its action space.
        seed: seeds the policy's and algorithm's generators.
        num_update_steps: update steps of the run, for ``"linear"`` schedules.
        env_id: named in errors.
        where: where the section is in the file (``agents.members.NAME.``), named in errors.
        explore: False builds the policy without exploration noise (a frozen policy).
        agents: the multi-agent env's agents, for a team algorithm (``AlgorithmSpec.team``).
    """
    spec = get_spec(section.name)
    params = build_params(spec, section.params, num_update_steps=num_update_steps)
    exploration = spec.exploration_model.model_validate(section.exploration)
    context = BuildContext(
        observation_space=observation_space,
        action_space=action_space,
        params=params,
        network=spec.network_model.model_validate(section.network),
        exploration=exploration if explore else _no_noise(exploration),
        seed=seed,
        agents=agents,
    )
    try:
        return spec.build(context)
    except ConfigurationError as error:
        raise ExperimentError(f"{where}algorithm {spec.name} on {env_id}: {error}") from None
    except TypeError as error:  # e.g. UnsupportedSpaceError: a Box-only algorithm on Discrete actions
        raise ExperimentError(f"{where}algorithm {spec.name} on {env_id}: {error}") from None


def _no_noise(exploration: Section) -> Section:
    if isinstance(exploration, EpsilonGreedy):
        return EpsilonGreedy(eps_start=0.0, eps_end=0.0)
    if isinstance(exploration, GaussianNoise):
        return GaussianNoise(noise_std=0.0)
    return exploration


def off_policy_gradient_steps(experiment: Experiment, name: str, *, world_size: int = 1) -> int:
    """Gradient steps of an off-policy run, which its ``"linear"`` learning-rate schedules decay over:
    each training step collects ``c = ceil(n / N) * N`` env steps and takes ``round(u * c)`` gradient
    steps, ``ceil(epoch_num_steps / c)`` training steps an epoch (a run stopped early ends before the
    schedule does)."""
    t = experiment.trainer
    per_step = t.get("collection_step_num_env_steps")
    if per_step is None or world_size != 1:
        raise ExperimentError(
            f"algorithm.params: a 'linear' schedule of {name} decays over the run's gradient steps, which "
            f"are known in advance only for one process collecting env steps (trainer."
            f"collection_step_num_env_steps set, no data-parallel ranks); use 'constant'."
        )
    num_envs = experiment.env.num_training_envs
    ratio = float(t.get("update_step_num_gradient_steps_per_sample", 1.0))
    if min(per_step, t["max_epochs"], t["epoch_num_steps"], num_envs) < 1:
        return 1  # the trainer params name the bad value
    collected: int = -(-int(per_step) // num_envs) * num_envs
    training_steps = int(t["max_epochs"]) * -(-int(t["epoch_num_steps"]) // collected)
    return max(1, training_steps * round(ratio * collected))


def num_update_steps(experiment: Experiment, section: AlgorithmConfig, *, world_size: int = 1) -> int:
    """Update steps of the whole run, for the ``"linear"`` schedules of ``section`` (on-policy
    algorithms; off-policy ones decay over their gradient steps, :func:`off_policy_gradient_steps`).
    With ``world_size`` ranks each training step collects on every rank (each rank's
    ``num_training_envs`` and ``collection_step_num_env_steps``), and the run's env steps count all
    ranks, so the run has ``1 / world_size`` as many update steps."""
    spec = get_spec(section.name)
    uses_schedule = "linear" in section.params.values()
    if spec.family is Family.OFF_POLICY and uses_schedule:
        return off_policy_gradient_steps(experiment, spec.name, world_size=world_size)
    if spec.family is not Family.ON_POLICY:
        if uses_schedule:
            raise ExperimentError(
                f"algorithm.params: a 'linear' schedule in an experiment file is for online algorithms "
                f"(it decays over the run's update or gradient steps); {spec.name} trains offline: use "
                f"'constant' here, or LinearSchedule(num_update_steps=<gradient steps>) in Python."
            )
        return 1
    t = experiment.trainer
    per_step = t.get("collection_step_num_env_steps")
    if per_step is None:
        if uses_schedule:
            raise ExperimentError(
                "algorithm.params: a 'linear' schedule needs trainer.collection_step_num_env_steps (the "
                "number of update steps of an episode-collecting run is unknown in advance); use 'constant'."
            )
        return 1
    num_envs = experiment.env.num_training_envs
    if min(per_step, t["max_epochs"], t["epoch_num_steps"]) < 1:
        return 1  # the trainer params name the bad value
    collected = -(-per_step // num_envs) * num_envs * world_size  # every rank's collection step
    num_env_steps = t["max_epochs"] * -(-t["epoch_num_steps"] // collected) * collected
    return num_update_steps_for(
        num_env_steps=num_env_steps,
        collection_step_num_env_steps=per_step * world_size,
        num_envs=num_envs * world_size,
    )

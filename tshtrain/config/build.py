"""Build a whole run from a resolved :class:`Experiment`: envs, algorithm, buffers, collectors, loggers,
checkpointing and the trainer, laid out under one output directory::

    OUTPUT_DIR/config.yaml        the resolved experiment (written by ``tshtrain train``)
    OUTPUT_DIR/tensorboard/       TensorBoard event files      OUTPUT_DIR/csv/   CSV logs
    OUTPUT_DIR/checkpoints/       periodic-*/, best/, final/
    OUTPUT_DIR/info_stats.json    the final InfoStats          OUTPUT_DIR/buffer/  (buffer.save_on_exit)
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch

from tshtrain.algorithm.base import Algorithm
from tshtrain.checkpoint import CheckpointParams
from tshtrain.config.agents import build_multi_agent_algorithm, return_reduction, uses_exploration_noise
from tshtrain.config.algorithms import build_algorithm
from tshtrain.config.bounds import check_buffer_memory, check_network_memory, flat_size
from tshtrain.config.env_kinds import AnyVectorEnv, EnvInterface, EnvRequest, EnvSection, GymWrapper, env_kind
from tshtrain.config.envs import env_agents, make_collector, num_env_columns, tensor_buffer
from tshtrain.config.models import CsvConfig, Experiment, TensorboardConfig, WandbConfig
from tshtrain.config.registry import AlgorithmSpec, Family, get_spec
from tshtrain.config.resolve import STOP_SCORE, TRAINER_PARAMS, experiment_data
from tshtrain.data import ReplayBuffer, VectorReplayBuffer, load_buffer
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.data.collector_base import AnyReplayBuffer
from tshtrain.data.prioritized import PrioritizedReplayBuffer, PrioritizedVectorReplayBuffer
from tshtrain.distributed import DistributedContext
from tshtrain.env import TensorVectorEnv
from tshtrain.errors import ConfigurationError, ExperimentError
from tshtrain.logger.base import Logger
from tshtrain.parallel import DataParallel
from tshtrain.trainer import OfflineTrainer, OffPolicyTrainer, OnPolicyTrainer, TrainerOptions
from tshtrain.trainer.base import Trainer

TEST_SEED_OFFSET = 1000
"""test envs are seeded seed + 1000, seed + 1001, ..."""


@dataclass
class Run:
    """A built run: call ``trainer.run()``, then :meth:`close`."""

    experiment: Experiment
    spec: AlgorithmSpec
    output_dir: Path
    algorithm: Algorithm[Any]
    trainer: Trainer[Any, Any]
    envs: list[AnyVectorEnv]
    training_buffer: AnyReplayBuffer | None

    def close(self) -> None:
        """Close the envs and the logger."""
        for env in self.envs:
            env.close()
        logger = self.trainer.logger
        if logger is not None:
            logger.close()


def make_envs(
    env: EnvSection,
    num_envs: int,
    *,
    render_mode: str | None = None,
    extra_wrappers: Sequence[GymWrapper] = (),
    allowed_modules: Collection[str] = (),
    seed: int = 0,
) -> gym.vector.VectorEnv[Any, Any, Any]:
    """A vector env of the experiment's env section; ``render_mode`` and ``extra_wrappers`` (applied after
    the experiment's own) are for videos. Modules the section names (wrappers, a ``module:`` env id) are
    imported only when allowed (:mod:`tshtrain.config.entry_points`): Gymnasium's wrappers, tshtrain's
    env helpers and ``allowed_modules``. The kinds that build Gymnasium vector envs only (``seed``: the
    seed an EnvPool pool is built with; Gymnasium envs are seeded by their collector): the other kinds
    are built by :func:`make_any_envs`. ``env.vector: ray`` builds a
    :class:`tshtrain.env.ray_env.RayVectorEnv`, except for videos (``render_mode`` or ``extra_wrappers``),
    which are recorded in this process."""
    interface = env_kind(env.type).interface
    if interface is not EnvInterface.GYMNASIUM:
        raise ExperimentError(
            f"env.type: {env.type!r} is a {interface} env; Gymnasium wrappers, rendering and videos do "
            f"not apply to it (use tshtrain.config.make_any_envs)."
        )
    request = EnvRequest(
        num_envs=num_envs,
        seed=seed,
        allowed_modules=allowed_modules,
        render_mode=render_mode,
        extra_wrappers=extra_wrappers,
    )
    envs = env_kind(env.type).build(env, request)
    assert isinstance(envs, gym.vector.VectorEnv), f"env kind {env.type!r} built a {type(envs).__name__}"
    return envs


def make_any_envs(
    experiment: Experiment,
    num_envs: int,
    *,
    seed: int,
    test: bool = False,
    allowed_modules: Collection[str] = (),
) -> AnyVectorEnv:
    """The envs of the experiment's env section, of any kind, as the kind's builder
    (:mod:`tshtrain.config.env_kinds`) makes them: a Gymnasium vector env (as :func:`make_envs`), a
    torch-native env (seeded with ``seed``, on ``env.device`` or the experiment's device; ``test``: the
    envs of test steps), or a multi-agent PettingZoo env (seeded by its collector)."""
    env = experiment.env
    request = EnvRequest(
        num_envs=num_envs, seed=seed, device=experiment.device, test=test, allowed_modules=allowed_modules
    )
    return env_kind(env.type).build(env, request)


def build_policy_algorithm(
    experiment: Experiment, env: AnyVectorEnv, *, world_size: int = 1
) -> Algorithm[Any]:
    """The algorithm of a resolved experiment for the envs ``env`` (built like the run's envs): the
    top-level algorithm on the env's spaces, or, with an ``agents`` section, the multi-agent algorithm of
    every learner on one agent column's spaces (:mod:`tshtrain.config.agents`). ``world_size``: the
    ranks of a data-parallel run (see :func:`~tshtrain.config.algorithms.build_algorithm`)."""
    if experiment.agents is None:
        return build_algorithm(
            experiment, env.single_observation_space, env.single_action_space, world_size=world_size
        )
    return build_multi_agent_algorithm(
        experiment, env.single_observation_space, env.single_action_space, env_agents(env), env
    )


def build_run(
    experiment: Experiment,
    output_dir: str | Path,
    *,
    prefill: bool = True,
    allowed_modules: Collection[str] = (),
    check_finite: bool = True,
    distributed: DistributedContext | None = None,
) -> Run:
    """Everything ``tshtrain train`` runs (see the module docstring).

    Args:
        experiment: the resolved experiment.
        output_dir: where the run writes.
        prefill: fill the off-policy buffer with random steps first (a resumed run restores the buffer
            from its checkpoint instead).
        allowed_modules: modules besides the built-in ones that the experiment may name (wrappers, a
            ``module:`` env id); see :mod:`tshtrain.config.entry_points`.
        check_finite: the collectors check observations and rewards for NaN / inf after every vector
            step and name the sub-env, step and field (``Collector(check_finite=...)``).
        distributed: this process's rank of a data-parallel run: its training envs are seeded from
            ``DistributedContext.env_seed`` (seed + rank * num_training_envs), it logs only on rank 0.
    """
    spec = get_spec(experiment.algorithm.name)
    output_dir = Path(output_dir)
    if experiment.torch_threads is not None:
        torch.set_num_threads(experiment.torch_threads)
    env = experiment.env
    test_seed = experiment.seed + TEST_SEED_OFFSET
    test_envs = make_any_envs(
        experiment, env.num_test_envs, seed=test_seed, test=True, allowed_modules=allowed_modules
    )
    envs = [test_envs]
    try:
        _check_networks(experiment, test_envs)
        world_size = 1 if distributed is None else distributed.world_size
        algorithm = build_policy_algorithm(experiment, test_envs, world_size=world_size)
        reduction = return_reduction(experiment.agents, env_agents(test_envs))
        test_collector = make_collector(
            algorithm.policy, test_envs, seed=test_seed, check_finite=check_finite
        )
        common: dict[str, Any] = {
            "test_collector": test_collector,
            "checkpoint": _checkpoint(experiment, output_dir),
            "stop_fn": _stop_fn(experiment.trainer[STOP_SCORE]),
            **({"multi_agent_return_reduction": reduction} if reduction is not None else {}),
            **{k: v for k, v in experiment.trainer.items() if k != STOP_SCORE},
        }
        buffer: AnyReplayBuffer | None = None
        if spec.family is Family.OFFLINE:
            trainer = _trainer(
                spec,
                algorithm,
                common | {"buffer": _dataset(experiment)},
                experiment,
                output_dir,
                distributed=distributed,
            )
        else:
            training_seed = (
                experiment.seed
                if distributed is None
                else distributed.env_seed(experiment.seed, env.num_training_envs)
            )
            training_envs = make_any_envs(
                experiment, env.num_training_envs, seed=training_seed, allowed_modules=allowed_modules
            )
            envs.append(training_envs)
            buffer = _training_buffer(experiment, spec, training_envs)
            collector = make_collector(
                algorithm.policy,
                training_envs,
                buffer,
                exploration_noise=uses_exploration_noise(experiment),
                seed=training_seed,
                check_finite=check_finite,
            )
            if prefill and spec.family is Family.OFF_POLICY and experiment.buffer.prefill_env_steps:
                collector.collect(n_step=experiment.buffer.prefill_env_steps, random=True)
            trainer = _trainer(
                spec,
                algorithm,
                common | {"training_collector": collector},
                experiment,
                output_dir,
                distributed=distributed,
            )
    except BaseException:
        for vector_env in envs:
            vector_env.close()
        raise
    return Run(experiment, spec, output_dir, algorithm, trainer, envs, buffer)


def _trainer(
    spec: AlgorithmSpec,
    algorithm: Algorithm[Any],
    kwargs: dict[str, Any],
    experiment: Experiment,
    output_dir: Path,
    *,
    distributed: DistributedContext | None,
) -> Trainer[Any, Any]:
    """The trainer; its params are checked before the loggers create anything in ``output_dir``."""
    params_cls = TRAINER_PARAMS[spec.family]
    try:
        params = params_cls(**kwargs)
    except ConfigurationError as error:
        raise ExperimentError(f"trainer: {error}") from None
    if distributed is None or distributed.is_main:  # other ranks write no logs
        params = dataclasses.replace(params, logger=_logger(experiment, output_dir))
    trainer_cls: Any = {
        Family.ON_POLICY: OnPolicyTrainer,
        Family.OFF_POLICY: OffPolicyTrainer,
        Family.OFFLINE: OfflineTrainer,
    }[spec.family]
    options = TrainerOptions(distributed=None if distributed is None else DataParallel(distributed))
    built: Trainer[Any, Any] = trainer_cls(algorithm, params, options)
    return built


def _check_networks(experiment: Experiment, envs: AnyVectorEnv) -> None:
    """Refuse network sizes whose parameters cannot fit in memory, before any network is built."""
    obs_dim = flat_size(envs.single_observation_space)
    act_dim = flat_size(envs.single_action_space)
    check_network_memory(experiment.algorithm.network, "algorithm.network", obs_dim, act_dim)
    members = experiment.agents.members if experiment.agents is not None else {}
    for name, member in members.items():
        network = (member.algorithm or {}).get("network")
        if isinstance(network, dict):
            check_network_memory(network, f"agents.members.{name}.algorithm.network", obs_dim, act_dim)


def _check_buffer(size: int, on_policy: bool, envs: AnyVectorEnv) -> int:
    """``size``, once a buffer of that many transitions is known to fit in memory."""
    field = "trainer.collection_step_num_env_steps" if on_policy else "buffer.size"
    check_buffer_memory(field, size, envs.single_observation_space, envs.single_action_space)
    return size


def _training_buffer(experiment: Experiment, spec: AlgorithmSpec, envs: AnyVectorEnv) -> AnyReplayBuffer:
    """The training buffer: one column per sub-env, or per agent and env (multi-agent envs); on-policy
    runs hold one collection step (of every agent). Its size is checked against memory first."""
    num_envs, b, seed = experiment.env.num_training_envs, experiment.buffer, experiment.seed
    per_step = experiment.trainer.get("collection_step_num_env_steps")
    num_agents = max(1, len(env_agents(envs)))
    on_policy_size = None
    if isinstance(envs, TensorVectorEnv):  # VMAS agent columns: A rows per env, env steps count envs
        rows = int(envs.num_envs)
        if spec.family is Family.ON_POLICY and per_step is not None:
            on_policy_size = -(-per_step // (rows // num_agents)) * rows
        size = _check_buffer(on_policy_size or max(b.size, rows), on_policy_size is not None, envs)
        return tensor_buffer(experiment, size, envs)
    if spec.family is Family.ON_POLICY and per_step is not None:
        on_policy_size = -(-per_step // num_envs) * num_envs * num_agents
    if num_agents > 1:  # a multi-agent numpy env: one column per agent and env
        columns = num_env_columns(envs)
        size = _check_buffer(on_policy_size or max(b.size, columns), on_policy_size is not None, envs)
        if b.prioritized and on_policy_size is None:
            return PrioritizedVectorReplayBuffer(size, columns, b.alpha, b.beta, seed=seed)
        return VectorReplayBuffer(size, columns, seed=seed)
    if on_policy_size is not None:
        return VectorReplayBuffer(_check_buffer(on_policy_size, True, envs), num_envs, seed=seed)
    size = _check_buffer(b.size, False, envs)
    if b.prioritized:
        if num_envs == 1:
            return PrioritizedReplayBuffer(size, b.alpha, b.beta, seed=seed)
        return PrioritizedVectorReplayBuffer(size, num_envs, b.alpha, b.beta, seed=seed)
    if num_envs == 1:
        return ReplayBuffer(size, seed=seed)
    return VectorReplayBuffer(size, num_envs, seed=seed)


def _dataset(experiment: Experiment) -> BaseReplayBuffer:
    dataset = experiment.dataset
    if dataset is None:
        raise ExperimentError(
            f"dataset: {experiment.algorithm.name} is offline and needs dataset.path (a saved buffer "
            f"directory) or dataset.minari_id."
        )
    if dataset.path is not None:
        if not Path(dataset.path).is_dir():
            raise ExperimentError(
                f"dataset.path: {dataset.path!r} is not a directory; give a buffer saved by "
                f"tshtrain.data.save_buffer, or by a `tshtrain train` run with buffer.save_on_exit=true "
                f"(OUTPUT_DIR/buffer)."
            )
        return load_buffer(dataset.path, seed=experiment.seed)
    from tshtrain.data.minari import minari_to_buffer

    assert dataset.minari_id is not None
    return minari_to_buffer(dataset.minari_id, seed=experiment.seed)


def _stop_fn(stop_score: float | None) -> Callable[[float], bool] | None:
    if stop_score is None:
        return None
    return functools.partial(_reached, stop_score)


def _reached(threshold: float, score: float) -> bool:
    return score >= threshold


def _checkpoint(experiment: Experiment, output_dir: Path) -> CheckpointParams | None:
    c = experiment.checkpoint
    if not c.enabled:
        return None
    return CheckpointParams(
        directory=output_dir / "checkpoints",
        every_num_epochs=c.every_num_epochs,
        every_num_env_steps=c.every_num_env_steps,
        keep_last=c.keep_last,
        save_best=c.save_best,
        include_buffers=c.include_buffers,
    )


def _logger(experiment: Experiment, output_dir: Path) -> Logger | None:
    """The experiment's writers, each with its intervals and the resolved experiment as hyperparameters
    (TensorBoard's HPARAMS tab and MLflow's params: flattened; W&B's config: nested)."""
    from tshtrain.logger import (
        CompositeLogger,
        CsvLogger,
        LogIntervals,
        MLflowLogger,
        TensorboardLogger,
        WandbLogger,
        flatten_hparams,
        project_store_uri,
    )

    intervals = LogIntervals(**experiment.log_intervals)
    data = experiment_data(experiment)
    loggers: list[Logger] = []
    for config in experiment.loggers:
        if isinstance(config, TensorboardConfig):
            loggers.append(
                TensorboardLogger(
                    output_dir / "tensorboard", intervals=intervals, hparams=flatten_hparams(data)
                )
            )
        elif isinstance(config, CsvConfig):
            loggers.append(CsvLogger(output_dir / "csv", intervals=intervals))
        elif isinstance(config, WandbConfig):
            loggers.append(
                WandbLogger(
                    project=config.project,
                    name=output_dir.name,
                    group=config.group,
                    tags=config.tags,
                    mode=config.mode,
                    log_dir=output_dir,
                    config=data,
                    intervals=intervals,
                )
            )
        else:
            uri = config.tracking_uri or project_store_uri(output_dir)
            loggers.append(
                MLflowLogger(
                    tracking_uri=uri,
                    experiment_name=config.experiment_name,
                    run_name=output_dir.name,
                    params=flatten_hparams(data),
                    intervals=intervals,
                )
            )
    if not loggers:
        return None
    return loggers[0] if len(loggers) == 1 else CompositeLogger(loggers)

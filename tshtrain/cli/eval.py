"""``tshtrain eval CHECKPOINT --episodes N [--video DIR] [--json FILE]``: test a trained agent (or the
agents of a multi-agent run: their returns one by one, and the run's reduced score); ``tshtrain eval
FILE`` plays the fixed players of an experiment file against each other."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tshtrain.errors import ConfigurationError, ExperimentError

CONFIG_FILE = "config.yaml"


def add_parser(subparsers: Any) -> None:
    """Register the ``eval`` command."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "eval",
        help="run test episodes with a checkpoint's policy",
        description=(
            "Load the algorithm of a checkpoint written by `tshtrain train` and run test episodes with its "
            "deterministic policy. CHECKPOINT is a checkpoint directory (e.g. RUN/checkpoints/best) or a run "
            "directory (then best/, else final/, else the newest periodic checkpoint). The experiment "
            "is read from the run's config.yaml. CHECKPOINT may also be an experiment file whose agents "
            "section fixes every player (policy: random or a checkpoint): its players are evaluated against "
            "each other, with nothing trained."
        ),
    )
    parser.add_argument(
        "checkpoint",
        metavar="CHECKPOINT",
        help="a checkpoint directory, a run directory, or an experiment file of fixed players",
    )
    parser.add_argument("--episodes", "-n", type=int, default=10, help="test episodes (default: 10)")
    parser.add_argument(
        "--seed", type=int, default=None, help="seed of the test envs (default: the run's test seed)"
    )
    parser.add_argument(
        "--device",
        default=None,
        help="where the policy runs: auto, cpu, cuda, cuda:N or mps (default: the run's device setting); "
        "a checkpoint written on a GPU loads on a CPU-only machine with --device cpu",
    )
    parser.add_argument(
        "--stochastic", action="store_true", help="sample actions instead of the deterministic ones"
    )
    parser.add_argument(
        "--video",
        metavar="DIR",
        default=None,
        help="record each of the N episodes as an MP4 file into DIR (needs moviepy: "
        "pip install 'tshtrain[video]')",
    )
    parser.add_argument(
        "--json",
        metavar="FILE",
        default=None,
        help="also write the results to FILE as JSON (multi-agent runs: with each agent's returns)",
    )
    parser.add_argument(
        "--allow-module",
        dest="allowed_modules",
        action="append",
        default=[],
        metavar="MODULE",
        help="let the run's experiment import MODULE for env wrappers or a 'module:EnvId' env id "
        "(repeatable)",
    )
    parser.add_argument(
        "--trust",
        action="store_true",
        help="the checkpoint comes from a source you trust (needed for 'dcp' checkpoints, whose metadata "
        "is a pickle, unless they are your own: signed with your key); without it nothing from another's "
        "checkpoint is unpickled",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Evaluate; prints the mean, std, min and max return (multi-agent runs: of each agent, and the score
    reduced as ``agents.return_reduction`` says)."""
    if args.episodes < 1:
        print(f"tshtrain eval: error: --episodes must be >= 1, got {args.episodes}.", file=sys.stderr)
        return 2
    from tshtrain.config.agents import locate_checkpoint

    if Path(args.checkpoint).suffix in EXPERIMENT_SUFFIXES and Path(args.checkpoint).is_file():
        return _run_fixed_players(args)
    found = locate_checkpoint(Path(args.checkpoint))
    if isinstance(found, str):
        print(f"tshtrain eval: error: {found}", file=sys.stderr)
        return 1
    run_dir, checkpoint = found
    from tshtrain.config import load_experiment
    from tshtrain.config.build import TEST_SEED_OFFSET
    from tshtrain.config.env_kinds import EnvInterface, env_kind

    experiment = load_experiment(str(run_dir / CONFIG_FILE))
    if args.device is not None:
        from tshtrain.devices import check_device_form

        try:
            experiment = experiment.model_copy(update={"device": check_device_form(args.device)})
        except ConfigurationError as error:
            print(f"tshtrain eval: error: --device: {error}", file=sys.stderr)
            return 2
    if args.video is not None and env_kind(experiment.env.type).interface is not EnvInterface.GYMNASIUM:
        print(
            f"tshtrain eval: error: --video needs a Gymnasium env; env.type is {experiment.env.type!r}.",
            file=sys.stderr,
        )
        return 2
    seed = experiment.seed + TEST_SEED_OFFSET if args.seed is None else args.seed
    with _windowless_sdl() if args.video is not None else contextlib.nullcontext():
        stats = _collect(experiment, args, checkpoint, seed)
    _report(_results(stats, experiment, checkpoint), args)
    if args.video is not None:
        print(f"videos in {args.video}")
    return 0


def _report(results: dict[str, Any], args: argparse.Namespace) -> None:
    """Print the results, and write them to ``--json FILE`` if given."""
    _print_results(results)
    if args.json is not None:
        import json

        from tshtrain.config import write_atomic

        write_atomic(Path(args.json), json.dumps(results, indent=2) + "\n")


def _test_envs(experiment: Any, args: argparse.Namespace, seed: int) -> Any:
    """The experiment's test envs, seeded with ``seed``."""
    from tshtrain.config import make_any_envs

    return make_any_envs(
        experiment, experiment.env.num_test_envs, seed=seed, test=True, allowed_modules=args.allowed_modules
    )


EXPERIMENT_SUFFIXES = (".yaml", ".yml", ".toml", ".json")
"""a CHECKPOINT argument with one of these suffixes that names a file is an experiment file"""


def _run_fixed_players(args: argparse.Namespace) -> int:
    """``tshtrain eval FILE``: the fixed players of an experiment file against each other (no run, no
    checkpoint of the file's own; frozen players load theirs)."""
    from tshtrain.config import load_experiment
    from tshtrain.config.agents import build_fixed_players
    from tshtrain.config.build import TEST_SEED_OFFSET
    from tshtrain.config.envs import env_agents, make_collector

    if args.video is not None:
        print(
            "tshtrain eval: error: --video records the envs of a run; not with an experiment file.",
            file=sys.stderr,
        )
        return 2
    path = Path(args.checkpoint)
    try:
        experiment = load_experiment(str(path))
        if args.device is not None:
            from tshtrain.devices import check_device_form

            experiment = experiment.model_copy(update={"device": check_device_form(args.device)})
        seed = experiment.seed + TEST_SEED_OFFSET if args.seed is None else args.seed
        envs = _test_envs(experiment, args, seed)
        try:
            policy = build_fixed_players(
                experiment, envs.single_observation_space, envs.single_action_space, env_agents(envs), envs
            )
            stats = make_collector(policy, envs, seed=seed).collect(
                n_episode=args.episodes, deterministic=not args.stochastic
            )
        finally:
            envs.close()
    except (ExperimentError, ConfigurationError) as error:
        print(f"tshtrain eval: error: {path}: {error}", file=sys.stderr)
        return 2
    _report(_results(stats, experiment, path), args)
    return 0


def _collect(experiment: Any, args: argparse.Namespace, checkpoint: Path, seed: int) -> Any:
    """Build the test envs (one recorded env with ``--video``), load the checkpoint, run the episodes."""
    from tshtrain.checkpoint import load_algorithm_checkpoint
    from tshtrain.config import build_policy_algorithm, make_envs
    from tshtrain.config.env_kinds import AnyVectorEnv
    from tshtrain.config.envs import make_collector

    envs: AnyVectorEnv
    if args.video is not None:
        envs = make_envs(
            experiment.env,
            1,
            render_mode="rgb_array",
            extra_wrappers=[_recorder(Path(args.video), args.episodes)],
            allowed_modules=args.allowed_modules,
        )
    else:
        envs = _test_envs(experiment, args, seed)
    try:
        algorithm = build_policy_algorithm(experiment, envs)
        load_algorithm_checkpoint(algorithm, checkpoint, trusted=args.trust)
        _warn_if_not_finite(algorithm.policy, checkpoint)
        stats = make_collector(algorithm.policy, envs, seed=seed).collect(
            n_episode=args.episodes, deterministic=not args.stochastic
        )
    finally:
        envs.close()
    return stats


@contextlib.contextmanager
def _windowless_sdl() -> Iterator[None]:
    """SDL's dummy video and audio drivers while ``--video`` renders, unless the user chose drivers.

    The frames are ``rgb_array`` images drawn on pygame surfaces in memory: no window, no sound. Left
    to itself, SDL probes the window systems when an env first renders, and on a machine without a
    desktop session its Wayland probe has libwayland print "error: XDG_RUNTIME_DIR is invalid or not
    set in the environment." to file descriptor 2 (from C: Python cannot catch it), which is harmless
    but alarming. SDL reads the two variables when a subsystem starts, so they are set only for the
    recording (the envs are made, run and closed inside) and put back as they were afterwards.
    """
    import os

    chosen = {name: "dummy" for name in ("SDL_VIDEODRIVER", "SDL_AUDIODRIVER") if name not in os.environ}
    os.environ.update(chosen)
    try:
        yield
    finally:
        for name in chosen:
            os.environ.pop(name, None)


def _summary(values: Any) -> dict[str, float]:
    import numpy as np

    arr = np.asarray(values, dtype=np.float64)
    return {
        "mean": float(arr.mean()),
        "std": float(arr.std()),
        "min": float(arr.min()),
        "max": float(arr.max()),
    }


def _results(stats: Any, experiment: Any, checkpoint: Path) -> dict[str, Any]:
    """What eval reports: the score (the reduced return of multi-agent runs), and each agent's returns."""
    from tshtrain.config.agents import return_reduction
    from tshtrain.data.stats import CollectStats

    assert isinstance(stats, CollectStats)
    per_agent = stats.per_agent_returns
    results: dict[str, Any] = {
        "checkpoint": str(checkpoint),
        "episodes": stats.n_collected_episodes,
        "mean_length": float(stats.lens_stat.mean),
    }
    if per_agent is None:
        results["return"] = _summary(stats.returns)
        return results
    agents = stats.agents or tuple(f"agent_{i}" for i in range(per_agent.shape[1]))
    reduce = return_reduction(experiment.agents, agents)
    reduced = stats.with_return_reduction(reduce).returns if reduce is not None else per_agent.mean(axis=1)
    results["return_reduction"] = experiment.agents.return_reduction if experiment.agents else "mean"
    results["return"] = _summary(reduced)
    results["agents"] = {name: _summary(per_agent[:, i]) for i, name in enumerate(agents)}
    return results


def _print_results(results: dict[str, Any]) -> None:
    r = results["return"]
    agents = results.get("agents")
    label = "return" if agents is None else f"score ({results['return_reduction']} of the agents' returns)"
    print(
        f"{results['checkpoint']}: {results['episodes']} episodes, {label} {r['mean']:.2f} +- {r['std']:.2f} "
        f"(min {r['min']:.2f}, max {r['max']:.2f}), mean length {results['mean_length']:.1f}"
    )
    for name, a in (agents or {}).items():
        print(f"  {name}: return {a['mean']:.2f} +- {a['std']:.2f} (min {a['min']:.2f}, max {a['max']:.2f})")


def _recorder(directory: Path, num_episodes: int) -> Any:
    """A wrapper factory that records the first ``num_episodes`` episodes of an env into ``directory``.

    Only those: the env goes on past them (same-step autoreset starts episode ``num_episodes`` as the
    last counted one ends, and the collector resets the env once more when it is done), and recording
    every episode would save a one-frame video of each of those starts.
    """
    try:
        import moviepy  # type: ignore[import-untyped]  # noqa: F401  # only checks it is installed
    except ImportError:
        raise ConfigurationError("--video needs moviepy: pip install 'tshtrain[video]'") from None
    import functools

    from gymnasium.wrappers import RecordVideo

    return functools.partial(
        RecordVideo,
        video_folder=str(directory),
        episode_trigger=functools.partial(_is_counted, num_episodes),
        disable_logger=True,
    )


def _is_counted(num_episodes: int, episode: int) -> bool:
    """Is the 0-based ``episode`` of the env one of the ``num_episodes`` that eval counts?"""
    return episode < num_episodes


def _warn_if_not_finite(policy: Any, checkpoint: Path) -> None:
    """Say so when the evaluated policy holds NaN / inf weights (its returns then mean nothing)."""
    import torch

    bad = [
        name
        for name, tensor in policy.state_dict().items()
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all())
    ]
    if bad:
        print(
            f"tshtrain eval: warning: {checkpoint}: the policy's {', '.join(bad[:3])}"
            f"{' and more' if len(bad) > 3 else ''} hold NaN or inf values; the returns below are those of a "
            f"broken policy (evaluate an earlier checkpoint, e.g. best/).",
            file=sys.stderr,
        )

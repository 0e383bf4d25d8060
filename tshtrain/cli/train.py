"""``tshtrain train [CONFIG] [--set KEY=VALUE ...] [--output-dir DIR]``; ``tshtrain train --resume DIR
[--extend N]``."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tshtrain.config import Experiment, Run

from tshtrain.cli.failure import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_USAGE, report_failure
from tshtrain.cli.train_parts import (
    CONFIG_FILE,
    INFO_FILE,
    _announce,
    _build,
    _check_override_keys,
    _default_output_dir,
    _write_config,
)


def add_parser(subparsers: Any) -> None:
    """Register the ``train`` command."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "train",
        help="train an agent from an experiment file (default: PPO on CartPole-v1)",
        description=(
            "Build the envs, algorithm, collectors and trainer of an experiment file (YAML, TOML or JSON) "
            "and train. Without CONFIG, runs the default experiment: PPO on CartPole-v1 until the mean test "
            "return reaches 475. Writes OUTPUT_DIR/config.yaml (the resolved experiment; train it again to "
            "reproduce the run), logs, checkpoints and OUTPUT_DIR/info_stats.json. "
            "`tshtrain config ALGO` prints a complete experiment to start from."
        ),
    )
    parser.add_argument(
        "config", nargs="?", metavar="CONFIG", help="an experiment file (.yaml, .yml, .toml, .json)"
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a key, e.g. --set trainer.max_epochs=5 --set algorithm.params.lr=1e-3 "
        "(repeatable; values are read as YAML)",
    )
    parser.add_argument(
        "--output-dir",
        "-o",
        default=None,
        help="where the run writes (default: output_dir of the "
        "experiment, else runs/<algorithm>-<env>-<date>-<time>)",
    )
    parser.add_argument(
        "--resume",
        metavar="DIR",
        default=None,
        help="continue the stopped run in DIR from its newest checkpoint",
    )
    parser.add_argument(
        "--extend",
        metavar="N",
        type=int,
        default=None,
        help="with --resume: continue a finished run for N more epochs from its final checkpoint "
        "(trainer.max_epochs becomes the epochs done + N)",
    )
    parser.add_argument(
        "--allow-module",
        dest="allowed_modules",
        action="append",
        default=[],
        metavar="MODULE",
        help="let the experiment import MODULE (and its submodules) for env wrappers or a 'module:EnvId' "
        "env id; only gymnasium.wrappers and tshtrain.env are allowed otherwise (repeatable)",
    )
    parser.add_argument(
        "--no-check-finite",
        dest="check_finite",
        action="store_false",
        help="do not check observations and rewards for NaN/inf after every vector step (about 5%% faster "
        "collection; a NaN then surfaces later, as a NaN loss)",
    )
    parser.add_argument(
        "--trust",
        action="store_true",
        help="with --resume: DIR comes from a source you trust, so also unpickle the envs' snapshots of a "
        "checkpoint not signed with your key (a run from another machine or user), which makes the resumed "
        "run bit-exact. Not needed for your own runs: their checkpoints are signed with your key "
        "(docs/security.md). Without it nothing from a stranger's DIR is unpickled; the envs are reset",
    )
    parser.add_argument(
        "--seeds",
        metavar="SEEDS",
        default=None,
        help="train one run per seed side by side in this process, e.g. --seeds 0-9 or 0,3,7: each in "
        "OUTPUT_DIR/seed-N/ (a run directory of its own; `tshtrain plot OUTPUT_DIR/seed-*` draws them "
        "together; `--resume OUTPUT_DIR` continues them). The seeds of PPO, DQN and SAC update their stacked "
        "networks in one pass (docs/seeds.md); other algorithms train the seeds one after another",
    )
    parser.add_argument(
        "--nproc",
        metavar="N",
        type=int,
        default=None,
        help="train data-parallel on N local processes (torch.distributed, gloo on CPU): launches "
        "`torchrun --nproc_per_node N -m tshtrain.cli train ...` with the same arguments; each rank has "
        "the experiment's envs, so N ranks train like one process with N times the envs "
        "(docs/scaling.md)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Train (or resume); 0 on success, 1 on a bad experiment or a failed run, 130 on Ctrl-C."""
    if sys.stderr.isatty() and "WORLD_SIZE" not in os.environ:  # not in the ranks of a launched run
        from tshtrain.cli.run_lines import LOADING_LINE

        print(LOADING_LINE, file=sys.stderr, flush=True)
    from tshtrain.distributed import DistributedContext, launched_by_torchrun

    if args.nproc is not None and args.nproc < 1:
        print(f"tshtrain train: error: --nproc N needs N >= 1, got {args.nproc}.", file=sys.stderr)
        return EXIT_USAGE
    if args.nproc is not None and args.nproc > 1 and _is_seed_batch(args):
        print(
            "tshtrain train: error: --nproc and a batch of seeds (--seeds, or --resume of one) do not go "
            "together; use one.",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.nproc is not None and args.nproc > 1 and not launched_by_torchrun():
        return _launch(args)
    args.distributed = DistributedContext.from_env() if launched_by_torchrun() else None
    try:
        return _run(args)
    except BaseException as error:
        if args.distributed is not None:
            args.distributed.report_failure(error)
        raise
    finally:
        if args.distributed is not None:
            args.distributed.close()


def _is_seed_batch(args: argparse.Namespace) -> bool:
    """Whether the command starts (``--seeds``) or resumes (the output directory of one) a seed batch."""
    if args.seeds is not None:
        return True
    if args.resume is None or (Path(args.resume) / CONFIG_FILE).is_file():
        return False
    from tshtrain.cli.seeds import seed_directories

    return bool(seed_directories(Path(args.resume)))


def _launch(args: argparse.Namespace) -> int:
    """Run this command on ``args.nproc`` local ranks with ``torch.distributed.run`` (no restarts: a
    failing rank ends the run, and torchrun reports its error)."""
    import shlex
    import socket

    from tshtrain.cli.launch import run_torchrun

    output_dir = args.output_dir
    if args.resume is None and output_dir is None:  # one directory for all ranks
        from tshtrain.config import load_experiment
        from tshtrain.config.bounds import checked_output_dir

        experiment = load_experiment(args.config, args.overrides)
        output_dir = checked_output_dir(experiment.output_dir, args.config) or _default_output_dir(experiment)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [
        sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={args.nproc}", "--max-restarts=0",
        "--master_addr=127.0.0.1", f"--master_port={port}", "-m", "tshtrain.cli", "train",
    ]  # fmt: skip
    command += [args.config] if args.config is not None else []
    command += [f"--set={text}" for text in args.overrides]
    command += ["--output-dir", str(output_dir)] if output_dir is not None else []
    command += ["--resume", args.resume] if args.resume is not None else []
    command += ["--extend", str(args.extend)] if args.extend is not None else []
    command += [f"--allow-module={name}" for name in args.allowed_modules]
    command += [] if args.check_finite else ["--no-check-finite"]
    command += ["--trust"] if args.trust else []
    resume = f"tshtrain train --resume {shlex.quote(str(output_dir or args.resume))} --nproc {args.nproc}"
    return run_torchrun(command, debug=args.debug, resume=resume)


def _run(args: argparse.Namespace) -> int:
    if args.seeds is not None:
        if args.resume is not None or args.extend is not None or args.distributed is not None:
            print(
                "tshtrain train: error: --seeds starts a new batch of seeds; drop --resume/--extend/--nproc "
                "(tshtrain train --resume OUTPUT_DIR continues a batch).",
                file=sys.stderr,
            )
            return EXIT_USAGE
        from tshtrain.cli.seeds import train_seeds

        return train_seeds(args)
    if args.resume is not None:
        if args.config is not None or args.output_dir is not None:
            print(
                "tshtrain train: error: --resume DIR takes the experiment and the output directory from DIR; "
                "drop CONFIG and --output-dir.",
                file=sys.stderr,
            )
            return EXIT_USAGE
        if args.extend is not None and args.extend < 1:
            print(f"tshtrain train: error: --extend N needs N >= 1, got {args.extend}.", file=sys.stderr)
            return EXIT_USAGE
        return _resume(Path(args.resume), args)
    if args.extend is not None:
        print(
            "tshtrain train: error: --extend N continues a finished run: give it with --resume DIR.",
            file=sys.stderr,
        )
        return EXIT_USAGE
    from tshtrain.config import load_experiment
    from tshtrain.config.bounds import checked_output_dir
    from tshtrain.rundir import RunDirectory

    _check_override_keys(args.overrides)
    experiment = load_experiment(args.config, args.overrides)
    output_dir = Path(
        args.output_dir
        or checked_output_dir(experiment.output_dir, args.config)
        or _default_output_dir(experiment)
    )
    experiment = experiment.model_copy(update={"output_dir": str(output_dir)})
    main = args.distributed is None or args.distributed.is_main
    run_dir = RunDirectory.create(output_dir) if main else None  # the marker first, then the lock
    if args.distributed is not None:  # the other ranks write into the directory rank 0 made
        args.distributed.broadcast_object(None)
    if run_dir is None:
        built = _build(
            args.config or "the default experiment", experiment, output_dir, prefill=True, args=args
        )
        return _train(built, debug=args.debug, main=False)
    with run_dir:
        _announce(experiment, output_dir, resumed_from=None)  # before the loggers: W&B prints a banner
        try:
            built = _build(
                args.config or "the default experiment", experiment, output_dir, prefill=True, args=args
            )
            try:
                _write_config(experiment, output_dir)
            except BaseException:
                built.close()
                raise
        except BaseException:
            run_dir.abandon()  # nothing was trained: leave no half-made run directory behind
            raise
        return _train(built, debug=args.debug)


def _resume(directory: Path, args: argparse.Namespace) -> int:
    overrides: list[str] = args.overrides
    debug: bool = args.debug
    trusted: bool = args.trust
    from tshtrain.config import load_experiment
    from tshtrain.rundir import RunDirectory

    _check_override_keys(overrides)
    if not (directory / CONFIG_FILE).is_file() and args.distributed is None:
        from tshtrain.cli.seeds import resume_seeds, seed_directories

        seed_dirs = seed_directories(directory)
        if seed_dirs:  # the output directory of `tshtrain train --seeds`
            return resume_seeds(directory, seed_dirs, args)
    main = args.distributed is None or args.distributed.is_main
    run_dir, cleaned = RunDirectory.open_existing(directory) if main else (contextlib.nullcontext(), [])
    with run_dir:
        if cleaned:
            print(f"{directory}: removed {len(cleaned)} leftover(s) of writes interrupted by a killed run")
        config = directory / CONFIG_FILE
        if not config.is_file():
            print(
                f"tshtrain train: error: --resume {directory}: no {CONFIG_FILE} there; the run stopped "
                f"before it started training, so start it again in a new directory.",
                file=sys.stderr,
            )
            return EXIT_FAILURE
        extension = None if args.extend is None else _plan_extension(directory, args.extend, overrides)
        if extension is not None:
            overrides = [*overrides, f"trainer.max_epochs={extension.max_epochs}"]
        experiment = load_experiment(str(config), overrides)
        latest = extension.checkpoint if extension is not None else _latest_checkpoint(experiment, directory)
        if latest is None:
            print(
                f"tshtrain train: error: --resume {directory}: no complete periodic checkpoint under "
                f"{directory / 'checkpoints'}; the run stopped before its first checkpoint, so start "
                f"it again in a new directory.",
                file=sys.stderr,
            )
            return EXIT_FAILURE
        if main:
            _announce(experiment, directory, resumed_from=latest)  # before the loggers' banners
        built = _build(str(config), experiment, directory, prefill=False, args=args)
        try:
            built.trainer.load_checkpoint(latest, trusted=trusted)
            if extension is not None:
                _reopen(built, extension)
            # only now: an override that does not fit the checkpoint leaves config.yaml as it was
            if overrides:
                _write_config(experiment, directory)
        except BaseException:
            built.close()
            raise
        if built.trainer.done:
            built.close()
            print(
                f"{directory}: the run already finished ({built.trainer.stop_reason}); nothing to resume. "
                f"Continue it for N more epochs with: tshtrain train --resume {directory} --extend N"
            )
            return 0
        return _train(built, debug=debug, main=main)


def _latest_checkpoint(experiment: Experiment, directory: Path) -> Path | None:
    """The newest complete periodic checkpoint of the run in ``directory`` (None: none, or the
    experiment writes no checkpoints), found before the run is built: the same one the built trainer's
    ``CheckpointManager`` would name (its directory is ``directory / "checkpoints"``)."""
    from tshtrain.checkpoint import CheckpointManager, CheckpointParams

    if not experiment.checkpoint.enabled:
        return None
    return CheckpointManager(CheckpointParams(directory=directory / "checkpoints")).latest()


@dataclass(frozen=True)
class _Extension:
    """How ``--extend`` continues a finished run."""

    checkpoint: Path
    """the checkpoint written at the run's end (``final/``, else the newest periodic one)"""
    epochs_done: int
    """the epochs the run had done there"""
    max_epochs: int
    """the new budget: ``epochs_done`` + N"""


def _plan_extension(directory: Path, num_epochs: int, overrides: list[str]) -> _Extension:
    """The checkpoint to continue from and the new ``trainer.max_epochs``, read from the checkpoint's
    manifest before anything is built."""
    from tshtrain.checkpoint.files import read_manifest
    from tshtrain.errors import CheckpointError, ConfigurationError
    from tshtrain.trainer.stats import StopReason

    where = f"--resume {directory} --extend {num_epochs}"
    if any(text.partition("=")[0].strip() == "trainer.max_epochs" for text in overrides):
        raise ConfigurationError(
            f"{where}: --extend sets trainer.max_epochs (the epochs done + N); drop --set trainer.max_epochs."
        )
    checkpoints = directory / "checkpoints"
    final = checkpoints / "final"
    periodic = sorted(p for p in checkpoints.glob("periodic-*") if (p / "manifest.json").is_file())
    checkpoint = final if (final / "manifest.json").is_file() else (periodic[-1] if periodic else None)
    if checkpoint is None:
        raise ConfigurationError(
            f"{where}: no final or periodic checkpoint under {checkpoints} to continue from."
        )
    info = read_manifest(checkpoint).info
    reason = info.get("reason")
    if checkpoint == final and reason not in {r.value for r in StopReason}:
        raise ConfigurationError(
            f"{where}: the run did not finish (its final checkpoint was written after {reason!r}); "
            f"continue it first with: tshtrain train --resume {directory}"
        )
    counters = info.get("counters")
    epoch = counters.get("epoch") if isinstance(counters, dict) else None
    if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
        raise CheckpointError(f"{checkpoint}/manifest.json: no epoch count in its counters ({counters!r}).")
    return _Extension(checkpoint=checkpoint, epochs_done=epoch, max_epochs=epoch + num_epochs)


def _reopen(built: Run, extension: _Extension) -> None:
    """Let the loaded, finished run go on to its new budget; say so where it cannot, or where the
    result differs from a run that had the larger budget from the start."""
    from tshtrain.errors import CheckpointError, ConfigurationError
    from tshtrain.trainer.stats import StopReason

    trainer, where = built.trainer, f"--resume {built.output_dir} --extend"
    if trainer.counters.epoch != extension.epochs_done:
        raise CheckpointError(
            f"{extension.checkpoint}: its manifest counts {extension.epochs_done} epochs, its state "
            f"{trainer.counters.epoch}."
        )
    if not trainer.done:
        raise ConfigurationError(
            f"{where}: the run has not finished (checkpoint {extension.checkpoint.name}); continue it "
            f"first with: tshtrain train --resume {built.output_dir}"
        )
    stop_score = built.experiment.trainer.get("stop_score")
    best = trainer.best.score
    stopped_by_score = trainer.stop_reason is StopReason.STOP_FN
    if stopped_by_score and stop_score is not None and best is not None and best >= stop_score:
        raise ConfigurationError(
            f"{where}: the run stopped at epoch {extension.epochs_done} because its test score reached "
            f"trainer.stop_score={stop_score} (best: {best}), so it would stop again at once; add "
            f"--set trainer.stop_score=null (or a score above {best}) to train on."
        )
    trainer.reopen()
    linear = sorted(k for k, v in built.experiment.algorithm.params.items() if v == "linear")
    if linear:
        print(
            f"note: algorithm.params {', '.join(linear)} are 'linear' schedules: they now decay over all "
            f"{extension.max_epochs} epochs, so training goes on at the rates a {extension.max_epochs}-epoch "
            f"run has at epoch {extension.epochs_done} (higher than where this run ended); the first "
            f"{extension.epochs_done} epochs decayed faster than such a run's would have."
        )


def _train(built: Run, *, debug: bool, main: bool = True) -> int:
    import dataclasses
    import json

    from tshtrain.checkpoint import CheckpointManager
    from tshtrain.cli.failure import write_failure, write_failure_advice
    from tshtrain.cli.run_lines import result_lines
    from tshtrain.config import write_atomic
    from tshtrain.data import save_buffer

    experiment = built.experiment
    if not main:  # another rank of a data-parallel run: rank 0 reports and writes the results
        try:
            built.trainer.run()
        finally:
            built.close()
        return 0
    try:
        info = built.trainer.run()
        if experiment.buffer.save_on_exit and built.training_buffer is not None:
            save_buffer(built.training_buffer, built.output_dir / "buffer")
    except KeyboardInterrupt:
        report_failure("train", _interrupted_message(built), debug=debug)
        return EXIT_INTERRUPTED
    except Exception as error:  # disk full, ulimit -f: say so, and how to continue (not a torch trace)
        cause = write_failure(error)
        if cause is None:
            raise
        params = built.trainer.params.checkpoint
        latest = CheckpointManager(params).latest() if params is not None else None
        raise OSError(write_failure_advice(cause, built.output_dir, latest)) from error
    finally:
        built.close()
    write_atomic(
        built.output_dir / INFO_FILE, json.dumps(dataclasses.asdict(info), indent=2, default=str) + "\n"
    )
    print("\n".join(result_lines(info, built.output_dir)))
    return 0


def _interrupted_message(built: Run) -> str:
    """Where the run stopped and the command that continues it."""
    from tshtrain.checkpoint import CheckpointManager
    from tshtrain.cli.run_lines import interrupted_message

    params = built.trainer.params.checkpoint
    latest = CheckpointManager(params).latest() if params is not None else None
    unsigned = "" if latest is None else _unsigned_pickles(latest)
    return interrupted_message(built.output_dir, latest, unsigned)


def _unsigned_pickles(checkpoint: Path) -> str:
    """Why a resume from ``checkpoint`` would not restore its pickled env snapshots ("" if it would:
    it holds none, or it is signed with this user's key)."""
    from tshtrain.checkpoint.files import read_manifest
    from tshtrain.errors import CheckpointError
    from tshtrain.signing import read_key

    try:
        manifest = read_manifest(checkpoint)
    except CheckpointError as error:
        return f"it cannot be read ({error})"
    pickles = any(rel.startswith("envs/") and rel.endswith(".pkl") for rel in manifest.files)
    if manifest.provenance.own or not pickles:
        return ""
    return read_key().problem or manifest.provenance.reason  # the key's problem is the one to fix

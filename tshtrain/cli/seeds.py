"""``tshtrain train [CONFIG] --seeds 0-9``: one run per seed, side by side in one process
(:mod:`tshtrain.seeds`), each in ``OUTPUT_DIR/seed-N/``; ``tshtrain train --resume OUTPUT_DIR`` continues
them. The seeds of PPO, DQN and SAC update together (:class:`~tshtrain.seeds.SeedBatch`); other
algorithms train the seeds one after another in this process (said when it starts)."""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tshtrain.cli.failure import EXIT_INTERRUPTED, EXIT_USAGE

if TYPE_CHECKING:
    from tshtrain.config import Experiment, Run

MAX_SEEDS = 1024
"""the most seeds one ``--seeds`` takes (checked before anything is built)"""
SEED_DIR = "seed-{}"
_SEED_DIR_PATTERN = re.compile(r"seed-(\d+)")
_PERIODIC_PATTERN = re.compile(r"periodic-\d{6}-\d{12}")


def parse_seeds(text: str) -> list[int]:
    """``"0-9"``, ``"0,3,7"`` or both (``"0-4,10"``) -> the seeds, in order, each once.

    Raises:
        ValueError: another form, a seed outside [0, 2**63), a descending range, a repeated seed or more
            than :data:`MAX_SEEDS` seeds (the message names the value and what is allowed).
    """
    allowed = f"allowed: seeds and ranges like 0-9 or 0,3,7 (at most {MAX_SEEDS} seeds, each in [0, 2**63))"
    shown = text if len(text) <= 60 else text[:57] + "..."
    if len(text) > 20 * MAX_SEEDS:
        raise ValueError(f"--seeds {shown!r} is too long; {allowed}.")
    seeds: list[int] = []
    for part in text.split(","):
        match = re.fullmatch(r"\s*(\d{1,19})\s*(?:-\s*(\d{1,19})\s*)?", part)
        if match is None:
            raise ValueError(f"--seeds {shown!r}: {part.strip()!r} is not a seed or a range; {allowed}.")
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) is not None else low
        if high < low:
            raise ValueError(f"--seeds {shown!r}: the range {low}-{high} is descending; {allowed}.")
        if high >= 2**63:
            raise ValueError(f"--seeds {shown!r}: {high} is not below 2**63; {allowed}.")
        if len(seeds) + high - low + 1 > MAX_SEEDS:
            raise ValueError(f"--seeds {shown!r} names more than {MAX_SEEDS} seeds; {allowed}.")
        seeds.extend(range(low, high + 1))
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"--seeds {shown!r} names a seed twice; {allowed}.")
    return seeds


def seed_directories(directory: Path) -> list[Path]:
    """The ``seed-N`` run directories of a seed batch's output directory, by seed (empty: not one)."""
    found = (
        [
            (int(m.group(1)), p)
            for p in directory.iterdir()
            if (m := _SEED_DIR_PATTERN.fullmatch(p.name)) is not None and (p / ".tshtrain-run").is_file()
        ]
        if directory.is_dir()
        else []
    )
    return [p for _, p in sorted(found)]


def train_seeds(args: argparse.Namespace) -> int:
    """A new seed batch: ``args.seeds`` of the experiment ``args.config`` (with ``args.overrides``)."""
    from tshtrain.cli.train_parts import (
        _announce,
        _build,
        _check_override_keys,
        _default_output_dir,
        _write_config,
    )
    from tshtrain.config import load_experiment
    from tshtrain.config.bounds import checked_output_dir
    from tshtrain.rundir import RunDirectory

    if args.nproc is not None and args.nproc > 1:
        print("tshtrain train: error: --seeds and --nproc do not go together; use one.", file=sys.stderr)
        return EXIT_USAGE
    try:
        seeds = parse_seeds(args.seeds)
    except ValueError as error:
        print(f"tshtrain train: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    _check_override_keys(args.overrides)
    base = load_experiment(args.config, args.overrides)
    output_dir = Path(
        args.output_dir or checked_output_dir(base.output_dir, args.config) or _default_output_dir(base)
    )
    source = args.config or "the default experiment"
    with contextlib.ExitStack() as stack:
        built: list[Run] = []
        try:
            for seed in seeds:
                seed_dir = output_dir / SEED_DIR.format(seed)
                experiment = _seed_experiment(base, seed, seed_dir, len(seeds))
                run_dir = stack.enter_context(RunDirectory.create(seed_dir))
                try:
                    if not built:
                        _announce(experiment, output_dir, resumed_from=None)
                    one = _build(source, experiment, seed_dir, prefill=True, args=args)
                    built.append(one)
                    _write_config(experiment, seed_dir)
                except BaseException:
                    run_dir.abandon()
                    raise
        except BaseException:
            for one in built:
                one.close()
            raise
        return _train_all(built, output_dir, args.debug)


def resume_seeds(directory: Path, seed_dirs: list[Path], args: argparse.Namespace) -> int:
    """Continue the seed batch in ``directory``: every unfinished seed from the newest periodic
    checkpoint that all of them have (seeds of a batch update in lockstep)."""
    from tshtrain.checkpoint import CheckpointManager, CheckpointParams
    from tshtrain.cli.train_parts import CONFIG_FILE, INFO_FILE, _announce, _build, _check_override_keys
    from tshtrain.config import load_experiment
    from tshtrain.rundir import RunDirectory

    if args.extend is not None:
        print(
            "tshtrain train: error: --extend is for one run; resume the seeds, then extend each.",
            file=sys.stderr,
        )
        return EXIT_USAGE
    _check_override_keys(args.overrides)
    with contextlib.ExitStack() as stack:
        pending: list[Path] = []
        for seed_dir in seed_dirs:
            run_dir, _ = RunDirectory.open_existing(seed_dir)
            stack.enter_context(run_dir)
            if (seed_dir / INFO_FILE).is_file():  # written when the seed's run ended normally
                print(f"{seed_dir}: finished")
            else:
                pending.append(seed_dir)
        if not pending:
            print(f"{directory}: every seed finished; nothing to resume.")
            return 0
        name = _common_checkpoint(pending)
        built: list[Run] = []
        try:
            for seed_dir in pending:
                experiment = load_experiment(str(seed_dir / CONFIG_FILE), args.overrides)
                # in lockstep from the newest checkpoint all have; else each from its own newest (or anew)
                own = CheckpointManager(CheckpointParams(directory=seed_dir / "checkpoints")).latest()
                checkpoint = seed_dir / "checkpoints" / name if name is not None else own
                if not built:
                    _announce(experiment, directory, resumed_from=checkpoint)
                one = _build(
                    str(seed_dir / CONFIG_FILE), experiment, seed_dir, prefill=checkpoint is None, args=args
                )
                built.append(one)
                if checkpoint is not None:
                    one.trainer.load_checkpoint(checkpoint, trusted=args.trust)
        except BaseException:
            for one in built:
                one.close()
            raise
        if name is None and len(pending) > 1:
            print(
                f"tshtrain: the unfinished seeds ({', '.join(p.name for p in pending)}) have no periodic "
                f"checkpoint in common; each continues from its own newest one (or starts anew), one after "
                f"another",
                flush=True,
            )
        return _train_all(built, directory, args.debug, batch=name is not None)


def _seed_experiment(base: Experiment, seed: int, seed_dir: Path, num_seeds: int) -> Experiment:
    trainer = dict(base.trainer)
    if num_seeds > 1:  # one line per seed at the end, not K progress bars at once
        trainer["show_progress"] = False
    return base.model_copy(update={"seed": seed, "output_dir": str(seed_dir), "trainer": trainer})


def _common_checkpoint(seed_dirs: list[Path]) -> str | None:
    """The newest periodic checkpoint name (``periodic-EPOCH-ENVSTEP``) complete in every seed."""
    common: set[str] | None = None
    for seed_dir in seed_dirs:
        names = {
            p.name
            for p in (seed_dir / "checkpoints").glob("periodic-*")
            if _PERIODIC_PATTERN.fullmatch(p.name) is not None and (p / "manifest.json").is_file()
        }
        common = names if common is None else common & names
    return max(common) if common else None


def _train_all(built: list[Run], output_dir: Path, debug: bool, *, batch: bool = True) -> int:
    """Train the built runs (a :class:`SeedBatch` when it takes them and ``batch``, else one after
    another); each seed's results are written as soon as its run ends, so that a resume after a Ctrl-C
    or a failure knows which seeds finished."""
    import dataclasses
    import json

    from tshtrain.cli.failure import report_failure
    from tshtrain.cli.run_lines import result_lines
    from tshtrain.cli.train_parts import INFO_FILE
    from tshtrain.config import write_atomic
    from tshtrain.errors import ConfigurationError
    from tshtrain.seeds import SeedBatch
    from tshtrain.trainer.stats import InfoStats

    def finished(k: int, info: InfoStats) -> None:
        write_atomic(
            built[k].output_dir / INFO_FILE,
            json.dumps(dataclasses.asdict(info), indent=2, default=str) + "\n",
        )

    trainers: list[Any] = [one.trainer for one in built]
    seed_batch: SeedBatch | None = None
    try:
        if batch:
            try:
                seed_batch = SeedBatch(trainers)
            except ConfigurationError as why:
                print(f"tshtrain: the seeds train one after another ({why})", flush=True)
        if seed_batch is not None:
            infos = seed_batch.run(on_seed_end=finished)
        else:
            infos = []
            for k, trainer in enumerate(trainers):
                infos.append(trainer.run())
                finished(k, infos[-1])
    except KeyboardInterrupt:
        report_failure(
            "train",
            f"interrupted; continue every seed with: tshtrain train --resume {output_dir}",
            debug=debug,
        )
        return EXIT_INTERRUPTED
    finally:
        for one in built:
            one.close()
    for one, info in zip(built, infos, strict=True):
        print("\n".join(result_lines(info, one.output_dir)))
    if seed_batch is not None:
        print(
            f"tshtrain: {len(built)} seeds, {seed_batch.num_stacked_updates} stacked updates; plot them "
            f"with: tshtrain plot {output_dir}/seed-* -o curves.png"
        )
    return 0

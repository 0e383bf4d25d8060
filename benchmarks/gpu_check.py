"""The GPU check: the first thing to run on a machine with a GPU (at most ~8 minutes on one GPU).

Run from the repository root, in the benchmark venv (tshtrain[bench], vmas; rsl_rl if installed)::

    python benchmarks/gpu_check.py                         # cuda: the CUDA test tier, then the table
    python benchmarks/gpu_check.py --compiled              # ... with a tshtrain row on compile_loss=True
    python benchmarks/gpu_check.py --device cpu --quick    # the CI smoke run (well under a minute)

1. The CUDA test tier (``pytest -m cuda tests/cuda``) in a subprocess; skipped with ``--device cpu``.
2. PPO on two batched torch envs on ``--device``: VMAS navigation (``vmas_task.TASK``, Box actions) and
   the torch CartPole (``tshtrain.env.torch_cartpole``, Discrete actions), at 4096 and 16,384 envs
   (``--quick``: 32 and 64), with the settings of ``vmas_task.PPOSettings`` for every contestant: the
   hand loop (``hand_ppo_vmas.HandPPO`` for Box actions, :class:`HandCategoricalPPO` here for Discrete),
   tshtrain, and rsl_rl (Box actions; skipped with a line saying why when it is not installed).

For each run: one warm-up iteration on a fresh build (its seconds are reported: they hold
``torch.compile``'s compilation), then ``--iterations`` timed iterations on another fresh build
(env steps/s, ratio to the hand loop, peak GPU memory of the timed run), then one iteration under
``torch.profiler`` counting host<->device copies (``Memcpy HtoD`` / ``DtoH`` events) per vector step.
On the CPU there is no GPU memory (``-``) and there are no copies (0).

It prints one table and the lines that flag what would be a bug (see benchmarks/README.md, "GPU
check"). Exit status: 1 if the CUDA tier fails or a tshtrain run fails, else 0. A script: it asserts no
timing.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hand_ppo_vmas
import vmas_contestants as vc
import vmas_task as vt

from tshtrain.env.tensor_env import TensorVectorEnv

ROOT = Path(__file__).resolve().parents[1]
HAND = "hand loop"
Train = Callable[[int], None]
"""num_iterations -> runs that many PPO iterations (a rollout, then the update)"""
Builder = Callable[[vt.TimedEnv, vt.PPOSettings, int], Train]
"""(env, settings, seed) -> the run, built untimed"""


# ============================================================================ envs
def make_env(kind: str, num_envs: int, device: str, seed: int) -> TensorVectorEnv:
    """``vmas`` (the benchmark's navigation task) or ``cartpole`` (the torch CartPole) on ``device``."""
    if kind == "vmas":
        from tshtrain.env.vmas import VmasEnv

        kwargs = vt.task_kwargs(vt.TASK["scenario"])
        return VmasEnv(
            vt.TASK["scenario"], num_envs=num_envs, device=device, seed=seed,
            max_episode_steps=vt.TASK["max_episode_steps"], **kwargs,
        )  # fmt: skip
    from tshtrain.env.torch_cartpole import TorchCartPole

    return TorchCartPole(num_envs, device=device, seed=seed)


# ============================================================================ contestants
class HandCategoricalPPO:
    """PPO written by hand for Discrete actions on a batched torch env: the loop of
    ``hand_ppo_vmas.HandPPO`` with a softmax policy; everything on the env's device."""

    def __init__(self, env: TensorVectorEnv, s: vt.PPOSettings, *, seed: int):
        torch.manual_seed(seed)
        self.env, self.s, dev = env, s, env.device
        n, t_len, o_dim = env.num_envs, s.rollout_len, vt.obs_dim(env)
        num_actions = int(env.single_action_space.n)  # type: ignore[attr-defined]  # Discrete
        self.actor = vt.mlp_tanh([o_dim, *s.hidden_sizes, num_actions]).to(dev)
        self.critic = vt.mlp_tanh([o_dim, *s.hidden_sizes, 1]).to(dev)
        self.params = [*self.actor.parameters(), *self.critic.parameters()]
        self.optimizer = torch.optim.Adam(self.params, lr=s.lr, fused=True)
        self.obs_TNO = torch.zeros(t_len, n, o_dim, device=dev)
        self.act_TN = torch.zeros(t_len, n, dtype=torch.int64, device=dev)
        self.logp_TN, self.rew_TN, self.value_TN = (torch.zeros(t_len, n, device=dev) for _ in range(3))
        self.ended_TN = torch.zeros(t_len, n, dtype=torch.bool, device=dev)
        obs, _ = env.reset(seed=seed)
        assert isinstance(obs, torch.Tensor)
        self.obs_NO = obs

    def train(self, num_iterations: int) -> None:
        for _ in range(num_iterations):
            self.rollout()
            self.update()

    @torch.no_grad()
    def rollout(self) -> None:
        obs_NO = self.obs_NO
        for t in range(self.s.rollout_len):
            logits_NK = self.actor(obs_NO)
            act_N = torch.multinomial(logits_NK.softmax(-1), 1).squeeze(1)
            self.obs_TNO[t], self.act_TN[t] = obs_NO, act_N
            self.logp_TN[t] = logits_NK.log_softmax(-1).gather(1, act_N[:, None]).squeeze(1)
            self.value_TN[t] = self.critic(obs_NO).squeeze(-1)
            out = self.env.step(act_N)
            cut_N = (out.truncated & ~out.terminated).float()  # bootstrap time-outs, without a sync
            assert isinstance(out.final_obs, torch.Tensor) and isinstance(out.obs, torch.Tensor)
            self.rew_TN[t] = out.rew + self.s.gamma * cut_N * self.critic(out.final_obs).squeeze(-1)
            self.ended_TN[t] = out.terminated | out.truncated
            obs_NO = out.obs
        self.obs_NO = obs_NO

    def update(self) -> None:
        s, num = self.s, self.s.rollout_len * self.env.num_envs
        with torch.no_grad():  # GAE
            next_value_N = self.critic(self.obs_NO).squeeze(-1)
            adv_TN, last_N = torch.empty_like(self.rew_TN), torch.zeros_like(next_value_N)
            not_done_TN = 1.0 - self.ended_TN.float()
            for t in reversed(range(s.rollout_len)):
                delta_N = self.rew_TN[t] + s.gamma * next_value_N * not_done_TN[t] - self.value_TN[t]
                last_N = delta_N + s.gamma * s.gae_lambda * not_done_TN[t] * last_N
                adv_TN[t], next_value_N = last_N, self.value_TN[t]
        obs_B, act_B, logp_B = self.obs_TNO.flatten(0, 1), self.act_TN.flatten(), self.logp_TN.flatten()
        adv_B, ret_B = adv_TN.flatten(), (adv_TN + self.value_TN).flatten()
        size = num // s.num_minibatches
        for _ in range(s.num_epochs):
            perm = torch.randperm(num, device=self.env.device)
            for k in range(s.num_minibatches):
                idx = perm[k * size : (k + 1) * size]
                obs, adv = obs_B[idx], adv_B[idx]
                log_probs = self.actor(obs).log_softmax(-1)
                logp = log_probs.gather(1, act_B[idx, None]).squeeze(1)
                entropy = -(log_probs.exp() * log_probs).sum(-1).mean()
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                ratio = (logp - logp_B[idx]).exp()
                clipped = ratio.clamp(1.0 - s.clip_range, 1.0 + s.clip_range)
                policy_loss = -torch.min(ratio * adv, clipped * adv).mean()
                value_loss = (self.critic(obs).squeeze(-1) - ret_B[idx]).square().mean()
                loss = policy_loss + s.vf_coef * value_loss - s.ent_coef * entropy
                self.optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(self.params, s.max_grad_norm)
                self.optimizer.step()


def _hand(env: vt.TimedEnv, s: vt.PPOSettings, seed: int) -> Train:
    if not hasattr(env.single_action_space, "n"):  # Box: the benchmark's hand loop, built on the device
        with torch.device(env.device):
            ppo = hand_ppo_vmas.HandPPO(env, s, seed=seed)

        def train(num_iterations: int) -> None:
            with torch.device(env.device):  # HandPPO makes its tensors on the default device
                ppo.train(num_iterations)

        return train
    return HandCategoricalPPO(env, s, seed=seed).train


def _tshtrain(compile_loss: bool) -> Builder:
    def build(env: vt.TimedEnv, s: vt.PPOSettings, seed: int) -> Train:
        from tshtrain.algorithm import PPO, CategoricalPolicy, GaussianPolicy, PPOParams, mlp
        from tshtrain.data import TensorCollector, TensorReplayBuffer
        from tshtrain.trainer import OnPolicyTrainer, OnPolicyTrainerParams

        torch.manual_seed(seed)
        space, o_dim, n = env.single_action_space, vt.obs_dim(env), env.num_envs
        policy: CategoricalPolicy | GaussianPolicy
        if hasattr(space, "n"):
            policy = CategoricalPolicy(mlp(o_dim, int(space.n), s.hidden_sizes), space, seed=seed)
        else:
            a_dim = len(vt.box_bounds(env)[0])
            actor = mlp(o_dim, a_dim, s.hidden_sizes)
            policy = GaussianPolicy(actor, space, init_log_std=s.init_log_std, seed=seed)
        params = PPOParams(
            lr=s.lr, gamma=s.gamma, gae_lambda=s.gae_lambda, clip_range=s.clip_range, ent_coef=s.ent_coef,
            vf_coef=s.vf_coef, max_grad_norm=s.max_grad_norm, compile_loss=compile_loss,
        )  # fmt: skip
        critic = mlp(o_dim, 1, s.hidden_sizes)
        algorithm = PPO(policy=policy, critic=critic, params=params, seed=seed).to(env.device)
        rollout = s.rollout_len * n

        def train(num_iterations: int) -> None:
            buffer = TensorReplayBuffer(rollout, n, device=env.device)
            collector = TensorCollector(policy, env, buffer, seed=seed)
            trainer_params = OnPolicyTrainerParams(
                training_collector=collector, max_epochs=num_iterations, epoch_num_steps=rollout,
                collection_step_num_env_steps=rollout, batch_size=rollout // s.num_minibatches,
                update_step_num_repetitions=s.num_epochs, verbose=False, show_progress=False,
            )  # fmt: skip
            OnPolicyTrainer(algorithm, trainer_params).run()

        return train

    return build


def _rsl_rl(env: vt.TimedEnv, s: vt.PPOSettings, seed: int) -> Train:
    run = vc._rsl_rl(env, s, seed, 1, vt.Phases())  # one learning iteration per call of run

    def train(num_iterations: int) -> None:
        for _ in range(num_iterations):
            run()

    return train


def contestants(compiled: bool) -> dict[str, Builder]:
    found: dict[str, Builder] = {HAND: _hand, "tshtrain": _tshtrain(False)}
    if compiled:
        found["tshtrain compiled"] = _tshtrain(True)
    found["rsl_rl"] = _rsl_rl
    return found


def skip_reason(name: str, env_kind: str) -> str | None:
    """Why a contestant does not run on an env (None: it runs)."""
    if name == "rsl_rl" and importlib.util.find_spec("rsl_rl") is None:
        return "rsl_rl is not installed (pip install rsl-rl-lib)"
    if name == "rsl_rl" and env_kind == "cartpole":
        return "the benchmark's rsl_rl adapter drives Box actions; CartPole's are Discrete(2)"
    return None


# ============================================================================ measuring
@dataclass(frozen=True)
class Row:
    env: str
    num_envs: int
    contestant: str
    warmup_seconds: float
    steps_per_second: float
    peak_mib: float | None
    """None on the CPU"""
    copies_per_step: float
    ratio: float | None = None


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _copies_per_step(train: Train, env: vt.TimedEnv, device: str) -> float:
    """Host<->device copies (Memcpy HtoD / DtoH events) per vector step over one iteration (0 on the
    CPU, where the profiler runs all the same so that ``--device cpu`` exercises this code)."""
    from torch.profiler import ProfilerActivity, profile

    cuda = device.startswith("cuda")
    before = env.num_vector_steps
    with profile(activities=[ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]) as prof:
        train(1)
        _sync(device)
    names = [event.name for event in prof.events()]
    copies = sum(1 for name in names if "Memcpy HtoD" in name or "Memcpy DtoH" in name)
    return copies / max(1, env.num_vector_steps - before)


def measure(
    name: str, build: Builder, *, env_kind: str, num_envs: int, args: argparse.Namespace, s: vt.PPOSettings
) -> Row:
    """Warm-up on one build, timed iterations on a second, the profiled iteration on a third."""
    cuda = args.device.startswith("cuda")

    def fresh(seed: int) -> tuple[vt.TimedEnv, Train]:
        env = vt.TimedEnv(make_env(env_kind, num_envs, args.device, seed))
        return env, build(env, s, seed)

    env, train = fresh(0)
    start = time.perf_counter()
    train(1)
    _sync(args.device)
    warmup = time.perf_counter() - start
    env.close()
    env, train = fresh(1)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    _sync(args.device)
    start = time.perf_counter()
    train(args.iterations)
    _sync(args.device)
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() / 2**20 if cuda else None
    env.close()
    env, train = fresh(2)
    copies = _copies_per_step(train, env, args.device)
    env.close()
    rate = args.iterations * s.rollout_len * num_envs / seconds
    return Row(env_kind, num_envs, name, warmup, rate, peak, copies)


def run_cuda_tier(args: argparse.Namespace) -> bool:
    """``pytest -m cuda tests/cuda``; True if it passed (or was skipped on the CPU)."""
    if not args.device.startswith("cuda") or args.skip_tests:
        print(f"CUDA test tier: skipped ({'--skip-tests' if args.skip_tests else '--device ' + args.device})")
        return True
    command = [sys.executable, "-m", "pytest", "-q", "-m", "cuda", "tests/cuda", "-p", "no:cacheprovider"]
    print("CUDA test tier:", " ".join(command[1:]), flush=True)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, timeout=args.test_timeout, check=False)
    print(f"CUDA test tier: exit {done.returncode} in {time.perf_counter() - start:.0f} s", flush=True)
    return done.returncode == 0


# ============================================================================ report
def _cell(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def table(rows: list[Row]) -> str:
    header = (
        "env",
        "envs",
        "contestant",
        "env steps/s",
        "x hand",
        "peak MiB",
        "H<->D copies/step",
        "warm-up s",
    )
    body = [
        (r.env, str(r.num_envs), r.contestant, f"{r.steps_per_second:,.0f}", _cell(r.ratio, ".2f"),
         _cell(r.peak_mib, ".0f"), f"{r.copies_per_step:.2f}", f"{r.warmup_seconds:.1f}")
        for r in rows
    ]  # fmt: skip
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    lines = [
        "  ".join(cell.rjust(w) for cell, w in zip(line, widths, strict=True)) for line in [header, *body]
    ]
    return "\n".join([lines[0], "-" * len(lines[0]), *lines[1:]])


def flags(rows: list[Row], *, check_speed: bool = True) -> list[str]:
    """What would be a bug (benchmarks/README.md, "GPU check"); ``check_speed=False`` (``--quick``,
    where fixed costs dominate the tiny sizes) leaves out the speed ratio."""
    found = []
    hand_peak = {(r.env, r.num_envs): r.peak_mib for r in rows if r.contestant == HAND}
    for r in rows:
        if not r.contestant.startswith("tshtrain"):
            continue
        where = f"{r.contestant}, {r.env}, {r.num_envs} envs"
        reference = hand_peak.get((r.env, r.num_envs))
        if r.peak_mib is not None and reference and r.peak_mib > 3.0 * reference:
            found.append(f"BUG? {where}: peak GPU memory {r.peak_mib:.0f} MiB, > 3x the hand loop's")
        if r.copies_per_step > 1.0:
            found.append(
                f"BUG? {where}: {r.copies_per_step:.2f} host<->device copies per vector step (expect < 1)"
            )
        if check_speed and r.ratio is not None and r.ratio < 0.8:
            found.append(f"BUG? {where}: {r.ratio:.2f}x the hand loop's env steps/s (expect >= 0.9)")
    return found


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda", help="cuda | cuda:N | cpu (default cuda)")
    parser.add_argument("--quick", action="store_true", help="32 and 64 envs, 8-step rollouts, 1 iteration")
    parser.add_argument("--envs", default=None, help="comma-separated numbers of envs (default 4096,16384)")
    parser.add_argument("--iterations", type=int, default=None, help="timed PPO iterations (default 5)")
    parser.add_argument("--compiled", action="store_true", help="add a tshtrain row with compile_loss=True")
    parser.add_argument("--skip-tests", action="store_true", help="do not run the CUDA test tier")
    parser.add_argument("--test-timeout", type=float, default=240.0, help="seconds for the CUDA tier")
    args = parser.parse_args(argv)
    args.envs = [int(x) for x in (args.envs or ("32,64" if args.quick else "4096,16384")).split(",")]
    args.iterations = args.iterations or (1 if args.quick else 5)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error(f"--device {args.device}: torch.cuda.is_available() is False; use --device cpu")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    threads = torch.get_num_threads()
    if args.device == "cpu":
        torch.set_num_threads(1)  # as bench_vmas: one thread for every contestant
    try:
        return _check(args)
    finally:
        torch.set_num_threads(threads)


def _check(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    settings = replace(vt.PPOSettings(), rollout_len=8) if args.quick else vt.PPOSettings()
    name = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else "cpu"
    print(f"GPU check on {args.device} ({name}), torch {torch.__version__}; settings: {settings}", flush=True)
    ok = run_cuda_tier(args)
    rows: list[Row] = []
    for env_kind in ("vmas", "cartpole"):
        for num_envs in args.envs:
            found: list[Row] = []
            for contestant, build in contestants(args.compiled).items():
                reason = skip_reason(contestant, env_kind)
                if reason is not None:
                    print(f"  {contestant}, {env_kind}, {num_envs} envs: skipped ({reason})", flush=True)
                    continue
                try:
                    found.append(
                        measure(
                            contestant, build, env_kind=env_kind, num_envs=num_envs, args=args, s=settings
                        )
                    )
                except Exception as exc:  # one contestant failing must not hide the others' numbers
                    ok = ok and not contestant.startswith("tshtrain")
                    print(
                        f"  {contestant}, {env_kind}, {num_envs} envs: FAILED ({type(exc).__name__}: {exc})"
                    )
            hand = next((r.steps_per_second for r in found if r.contestant == HAND), None)
            rows += [replace(r, ratio=None if hand is None else r.steps_per_second / hand) for r in found]
    print()
    print(table(rows))
    for line in flags(rows, check_speed=not args.quick):
        print(line)
    print(f"\nGPU check done in {time.perf_counter() - start:.0f} s: {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

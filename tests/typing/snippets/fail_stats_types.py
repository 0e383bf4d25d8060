"""Stats types are checked: every line marked 'expect-error' must be rejected by mypy."""

from tshtrain.algorithm import DQN, PPO, DQNTrainingStats, PPOTrainingStats
from tshtrain.data import RolloutBatch
from tshtrain.data.buffer import BaseReplayBuffer


def wrong(ppo: PPO, dqn: DQN, rollout: RolloutBatch, buffer: BaseReplayBuffer) -> None:
    a: DQNTrainingStats = ppo.update(rollout, batch_size=8, num_repetitions=1)  # expect-error
    b: PPOTrainingStats = dqn.update(buffer, 64)  # expect-error
    dqn.update(buffer, 64).clip_fraction  # expect-error
    del a, b

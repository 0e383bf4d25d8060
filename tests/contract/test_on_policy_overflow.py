"""Episode-based on-policy collection that overflows the training buffer is an error, not silent data loss."""

from __future__ import annotations

from typing import Any

import pytest


def test_on_policy_episode_collection_overflowing_the_buffer_raises(kit: Any) -> None:
    setup = kit.make_on_policy(
        num_envs=2,
        buffer_size=20,
        collection_step_num_episodes=4,
        epoch_num_steps=100,
        max_epochs=1,
        test_env=None,
    )
    with pytest.raises(RuntimeError, match=r"gathered \d+ env steps but the training buffer holds 20"):
        setup.trainer().run()

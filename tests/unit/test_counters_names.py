"""The counters' names: test steps count their env steps in ``test_env_step`` (``InfoStats.test_step``
keeps Tianshou's name), and counters saved under the old name still load."""

from __future__ import annotations

from tshtrain.counters import Counters


def test_test_env_step_is_the_name_and_the_old_name_still_loads() -> None:
    counters = Counters(test_env_step=7, env_step=3)
    assert counters.state_dict()["test_env_step"] == 7 and "test_step" not in counters.state_dict()
    old = {**counters.state_dict(), "test_step": 7}
    del old["test_env_step"]
    assert Counters.from_state_dict(old) == counters

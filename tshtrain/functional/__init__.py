"""Pure math: discounted returns, GAE (numpy/torch only)."""

from tshtrain.functional.returns import discounted_returns, gae_advantages

__all__ = ["discounted_returns", "gae_advantages"]

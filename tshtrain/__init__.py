"""tshtrain: typed-parameter reinforcement-learning trainers for PyTorch and Gymnasium.

Import from the subpackages: ``tshtrain.trainer``, ``tshtrain.algorithm``, ``tshtrain.data``,
``tshtrain.env``, ``tshtrain.logger``. This top-level module stays light so that ``import tshtrain``
is fast.
"""

__version__ = "0.1.0"

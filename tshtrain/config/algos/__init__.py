"""The algorithms experiment files can name, one module per trainer family (off-policy: Q-learning,
actor-critic and the multi-agent value decomposition). Each module holds, per algorithm, its builder
and its :class:`~tshtrain.config.spec.AlgorithmSpec` (params class, network and exploration sections,
default experiment) in its ``SPECS``;
:mod:`tshtrain.config.registry` collects them. Adding an algorithm is one entry in one of these modules.
"""

"""Every algorithm params class checks its number fields with the constrained types: NaN and infinity
are refused in every float field, bools in every number field, and the shared on-policy base is
abstract."""

from __future__ import annotations

import math

import pytest

from tshtrain.algorithm import (
    A2CParams,
    ActorCriticParams,
    BCParams,
    CQLParams,
    DDPGParams,
    DiscreteCQLParams,
    DiscreteSACParams,
    DQNParams,
    EpsilonSchedule,
    LinearSchedule,
    PPOParams,
    ReinforceParams,
    SACParams,
    TD3BCParams,
    TD3Params,
)
from tshtrain.constraints import field_checks
from tshtrain.errors import ConfigurationError

PARAMS: list[tuple[type, dict[str, object]]] = [
    (A2CParams, {}),
    (PPOParams, {}),
    (ReinforceParams, {}),
    (DQNParams, {}),
    (DDPGParams, {}),
    (TD3Params, {}),
    (SACParams, {}),
    (DiscreteSACParams, {}),
    (BCParams, {}),
    (CQLParams, {}),
    (DiscreteCQLParams, {}),
    (TD3BCParams, {}),
    (EpsilonSchedule, {}),
    (LinearSchedule, {"num_update_steps": 10}),
]


@pytest.mark.parametrize(("cls", "required"), PARAMS, ids=[cls.__name__ for cls, _ in PARAMS])
def test_every_float_field_refuses_nan_and_inf(cls: type, required: dict[str, object]) -> None:
    floats = [check.name for check in field_checks(cls) if check.kind is float]
    assert floats, f"{cls.__name__} has no checked float field"
    for name in floats:
        for bad in (math.nan, math.inf, -math.inf):
            with pytest.raises(
                ConfigurationError, match=rf"^{cls.__name__}\.{name} must be .*, got {bad}\.$"
            ):
                cls(**{**required, name: bad})


@pytest.mark.parametrize(("cls", "required"), PARAMS, ids=[cls.__name__ for cls, _ in PARAMS])
def test_every_number_field_refuses_bools(cls: type, required: dict[str, object]) -> None:
    for check in field_checks(cls):
        if check.kind is not bool:
            with pytest.raises(ConfigurationError, match=rf"^{cls.__name__}\.{check.name} must be "):
                cls(**{**required, check.name: True})


def test_the_on_policy_base_params_are_abstract() -> None:
    with pytest.raises(TypeError, match="abstract"):
        ActorCriticParams()  # type: ignore[abstract]  # the point of the test
    assert isinstance(PPOParams(), ActorCriticParams) and isinstance(A2CParams(), ActorCriticParams)


def test_cross_field_rules_stay_after_the_field_checks() -> None:
    with pytest.raises(
        ConfigurationError, match=r"^CQLParams\.cql_weight=0 cannot be tuned with with_lagrange"
    ):
        CQLParams(cql_weight=0.0, with_lagrange=True)

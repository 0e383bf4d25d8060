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
    OffPolicyActorCriticParams,
    PPOParams,
    REDQParams,
    ReinforceParams,
    SACParams,
    TD3BCParams,
    TD3Params,
    TwinDelayedParams,
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
    (REDQParams, {}),
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


OFF_POLICY_PARAMS = (DDPGParams, TD3Params, TD3BCParams, SACParams, DiscreteSACParams, REDQParams, CQLParams)


@pytest.mark.parametrize("base", [OffPolicyActorCriticParams, TwinDelayedParams])
def test_the_off_policy_base_params_are_abstract(base: type) -> None:
    with pytest.raises(TypeError, match="abstract"):
        base()


@pytest.mark.parametrize("cls", OFF_POLICY_PARAMS, ids=lambda cls: cls.__name__)
def test_the_off_policy_params_share_the_base_and_its_checks(cls: type) -> None:
    assert isinstance(cls(), OffPolicyActorCriticParams)
    with pytest.raises(
        ConfigurationError, match=rf"^{cls.__name__}\.tau must be a number in \(0, 1\], got 0\.$"
    ):
        cls(tau=0)
    with pytest.raises(ConfigurationError, match=rf"^{cls.__name__}\.lr_schedule must be a tshtrain"):
        cls(lr_schedule="linear")


def test_off_policy_defaults_kept() -> None:
    """The learning rates each algorithm declared before the shared base (its users rely on them)."""
    lrs = {cls.__name__: (cls().actor_lr, cls().critic_lr) for cls in OFF_POLICY_PARAMS}
    assert lrs == {
        "DDPGParams": (1e-3, 1e-3),
        "TD3Params": (1e-3, 1e-3),
        "TD3BCParams": (3e-4, 3e-4),
        "SACParams": (1e-3, 1e-3),
        "DiscreteSACParams": (3e-4, 3e-4),
        "REDQParams": (1e-3, 1e-3),
        "CQLParams": (1e-4, 3e-4),
    }
    assert {(cls().gamma, cls().tau, cls().lr_schedule) for cls in OFF_POLICY_PARAMS} == {(0.99, 0.005, None)}


def test_cross_field_rules_stay_after_the_field_checks() -> None:
    with pytest.raises(
        ConfigurationError, match=r"^CQLParams\.cql_weight=0 cannot be tuned with with_lagrange"
    ):
        CQLParams(cql_weight=0.0, with_lagrange=True)

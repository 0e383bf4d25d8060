"""From an experiment file to a complete, validated :class:`Experiment`.

``resolve_experiment`` lays the user's data over the algorithm's default experiment, rejects unknown keys
(with a did-you-mean suggestion) and keys of another trainer family, validates every value, and fills in
every field, so the result written back as OUTPUT_DIR/config.yaml states the whole run.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from tshtrain.algorithm.blocks.schedules import LinearSchedule
from tshtrain.config.env_kinds import KIND_OPTIONS, env_kind, multi_agent_kinds
from tshtrain.config.files import apply_overrides, merge_data, read_file
from tshtrain.config.models import AgentsConfig, AlgorithmConfig, Experiment, MemberConfig
from tshtrain.config.registry import (
    DEFAULT_ALGORITHM,
    AlgorithmSpec,
    Family,
    did_you_mean,
    get_spec,
    offline_names,
)
from tshtrain.config.schema import adapter, enum_fields, expected, value_fields
from tshtrain.config.sections import Section
from tshtrain.constraints import FiniteFloat
from tshtrain.errors import ConfigurationError, ExperimentError, short_repr
from tshtrain.logger.base import LogIntervals, family_log_intervals
from tshtrain.trainer import OfflineTrainerParams, OffPolicyTrainerParams, OnPolicyTrainerParams

TRAINER_PARAMS: dict[Family, type] = {
    Family.ON_POLICY: OnPolicyTrainerParams,
    Family.OFF_POLICY: OffPolicyTrainerParams,
    Family.OFFLINE: OfflineTrainerParams,
}
"""the trainer params class of each family"""

STOP_SCORE = "stop_score"
"""the trainer key that sets ``stop_fn``: stop when the test score reaches it (None: never)"""


SET_ELSEWHERE = {"save_checkpoint_every_num_epochs": "checkpoint.every_num_epochs"}
"""trainer params that an experiment file sets in another section (the checkpoint section writes the
checkpoints; the trainer param needs a ``save_checkpoint_fn``, which a file cannot give): one key per
setting"""


def trainer_fields(family: Family) -> dict[str, tuple[Any, Any]]:
    """The trainer keys of a family: the value fields of its params class (but :data:`SET_ELSEWHERE`)
    and ``stop_score``."""
    fields = value_fields(TRAINER_PARAMS[family])
    return {
        **{key: field for key, field in fields.items() if key not in SET_ELSEWHERE},
        STOP_SCORE: (FiniteFloat | None, None),
    }


def default_experiment_data(name: str = DEFAULT_ALGORITHM) -> dict[str, Any]:
    """The algorithm's default experiment as plain data (before resolving)."""
    spec = get_spec(name)
    return merge_data({"algorithm": {"name": spec.name}}, spec.defaults)


def default_experiment(name: str = DEFAULT_ALGORITHM) -> Experiment:
    """The algorithm's default experiment, resolved: every key filled in (what ``tshtrain config NAME``
    prints, and where the example scripts read their hyperparameters)."""
    return resolve_experiment(default_experiment_data(name), f"the default experiment of {name}")


def load_experiment(path: str | None, overrides: Sequence[str] = ()) -> Experiment:
    """Read an experiment file (None: the default experiment), apply ``--set`` overrides, resolve."""
    data = read_file(path) if path is not None else {}
    source = path or ("the default experiment with --set" if overrides else "the default experiment")
    return resolve_experiment(apply_overrides(data, overrides), source)


def resolve_experiment(data: Mapping[str, Any], source: str = "experiment") -> Experiment:
    """The complete experiment of ``data`` (see the module docstring).

    Raises:
        ExperimentError: naming ``source``, the key path, the value and what is allowed.
    """
    algorithm = data.get("algorithm", {})
    name = algorithm.get("name", DEFAULT_ALGORITHM) if isinstance(algorithm, Mapping) else algorithm
    try:
        spec = get_spec(name)
    except ExperimentError as error:
        raise ExperimentError(f"{source}: {error}") from None
    _check_sections(data, spec, source)
    merged = merge_data(default_experiment_data(spec.name), data)
    if "dataset" in data:  # a path and a Minari id are alternatives: the user's choice replaces the default
        merged["dataset"] = data["dataset"]
    _check_keys(merged, Experiment, "", source)
    try:
        experiment = Experiment.model_validate(merged)
    except ValidationError as error:
        raise ExperimentError(_describe(error, source)) from None
    section = _resolve_algorithm(spec, experiment.algorithm, source)
    trainer = _resolve_trainer(spec, experiment.trainer, source)
    log_intervals = _resolve_log_intervals(spec, experiment.log_intervals, source)
    experiment = experiment.model_copy(
        update={"algorithm": section, "trainer": trainer, "log_intervals": log_intervals}
    )
    if experiment.agents is not None:
        experiment = experiment.model_copy(update={"agents": _resolve_agents(experiment, spec, source)})
    _check_centralised_critics(experiment, source)
    return experiment


def _resolve_algorithm(
    spec: AlgorithmSpec, section: AlgorithmConfig, source: str, prefix: str = ""
) -> AlgorithmConfig:
    """An algorithm section with every params, network and exploration key filled in; errors name the
    key under ``prefix`` (e.g. ``agents.members.player_1.``)."""
    params = _resolve_params(spec, section.params, source, prefix)
    network = _validate_model(
        spec.network_model, section.network, f"{prefix}algorithm.network ({spec.name})", source
    )
    exploration = _validate_model(
        spec.exploration_model, section.exploration, f"{prefix}algorithm.exploration ({spec.name})", source
    )
    return section.model_copy(
        update={"params": params, "network": network.model_dump(), "exploration": exploration.model_dump()}
    )


def _resolve_agents(experiment: Experiment, spec: AlgorithmSpec, source: str) -> AgentsConfig:
    """The agents section with each member's algorithm resolved like the top-level one (laid over it,
    or over the named algorithm's default section) and of the same trainer family."""
    agents = experiment.agents
    assert agents is not None
    if spec.family is Family.OFFLINE:
        raise ExperimentError(
            f"{source}: agents: {spec.name} is an offline algorithm; several learners train online only "
            f"(on- or off-policy algorithms)."
        )
    if agents.update_mode == "parallel" and spec.family is Family.OFF_POLICY:
        raise ExperimentError(
            f"{source}: agents.update_mode: 'parallel' runs on-policy learners only (each update in its own "
            f"process); {spec.name} is off-policy, whose every gradient step samples the shared replay "
            f"buffer. Allowed for {spec.name}: sequential."
        )
    members: dict[str, MemberConfig] = {}
    for name, member in agents.members.items():
        if member.algorithm is None:
            members[name] = member
            continue
        prefix = f"agents.members.{name}."
        given = dict(member.algorithm)
        member_spec = _member_spec(given.get("name", spec.name), spec, f"{prefix}algorithm.name", source)
        if member_spec.name == spec.name:
            base: dict[str, Any] = experiment.algorithm.model_dump()
        else:
            base = merge_data({"name": member_spec.name}, member_spec.defaults.get("algorithm", {}))
        merged = merge_data(base, given)
        merged["name"] = member_spec.name
        _check_keys(merged, AlgorithmConfig, f"{prefix}algorithm.", source)
        try:
            section = AlgorithmConfig.model_validate(merged)
        except ValidationError as error:
            raise ExperimentError(_describe(error, source, prefix=f"{prefix}algorithm.")) from None
        resolved = _resolve_algorithm(member_spec, section, source, prefix)
        members[name] = member.model_copy(update={"algorithm": resolved.model_dump()})
    return agents.model_copy(update={"members": members})


def _member_spec(name: Any, top: AlgorithmSpec, where: str, source: str) -> AlgorithmSpec:
    try:
        spec = get_spec(name, where=where)
    except ExperimentError as error:
        raise ExperimentError(f"{source}: {error}") from None
    if spec.family is not top.family:
        raise ExperimentError(
            f"{source}: {where}: {spec.name} is an {spec.family} algorithm, but the top-level algorithm "
            f"{top.name} is {top.family}; the learners of one run share one trainer, so they must all be "
            f"{top.family} (mixing on- and off-policy learners is not possible): choose an {top.family} "
            f"algorithm, or make it a fixed policy (policy: random | frozen)."
        )
    return spec


def _check_centralised_critics(experiment: Experiment, source: str) -> None:
    """MAPPO's centralised critic reads the global state: the env must provide it."""
    sections = [("", experiment.algorithm.network)]
    if experiment.agents is not None:
        sections += [
            (f"agents.members.{name}.", member.algorithm.get("network", {}))
            for name, member in experiment.agents.members.items()
            if member.algorithm is not None
        ]
    for prefix, network in sections:
        if network.get("critic_per_world") and not network.get("centralised_critic"):
            raise ExperimentError(
                f"{source}: {prefix}algorithm.network.critic_per_world: true needs centralised_critic: true "
                f"(one MAPPO critic call per world on the global state); got centralised_critic: "
                f"{network.get('centralised_critic', False)}."
            )
        if network.get("centralised_critic") and not experiment.env.global_state:
            raise ExperimentError(
                f"{source}: {prefix}algorithm.network.centralised_critic: true (MAPPO) needs the env's "
                f"global state in the observations: set env.global_state: true (a multi-agent env: type "
                f"{multi_agent_kinds()}), or centralised_critic: false (IPPO)."
            )


ON_POLICY_BUFFER_KEYS = ("save_on_exit",)
"""the buffer keys an on-policy run uses: its buffer holds one collection step (its size follows from
``trainer.collection_step_num_env_steps``), with no prioritized replay and no prefill"""


def experiment_data(experiment: Experiment) -> dict[str, Any]:
    """A resolved experiment as plain data, with only the keys that apply to it: the sections its
    family does not use, the buffer keys an on-policy run does not read (:data:`ON_POLICY_BUFFER_KEYS`),
    the env options its env kind does not take (``vector`` and ``wrappers`` beyond Gymnasium, ``device``
    beyond torch-native envs, ``ray`` without ``vector: ray``, the agent options without agents, the
    centralised critic's without the env's global state) are left out: read back, each takes its default,
    which the run does not read either. What ``tshtrain config`` prints and ``config.yaml`` holds."""
    spec = get_spec(experiment.algorithm.name)
    exclude: dict[str, Any] = {"buffer": True} if spec.family is Family.OFFLINE else {"dataset": True}
    if experiment.agents is None:
        exclude["agents"] = True
    if spec.family is Family.ON_POLICY:
        exclude["buffer"] = set(type(experiment.buffer).model_fields) - set(ON_POLICY_BUFFER_KEYS)
    exclude["env"] = _inapplicable_env_keys(experiment)
    if not experiment.env.global_state:  # the MAPPO critic reads the global state of agents' envs
        exclude["algorithm"] = {"network": {"centralised_critic", "critic_per_world"}}
    data: dict[str, Any] = experiment.model_dump(mode="json", exclude=exclude)
    return data


def _inapplicable_env_keys(experiment: Experiment) -> set[str]:
    env = experiment.env
    kind = env_kind(env.type)
    keys = {option for option in KIND_OPTIONS if option not in kind.options}
    if env.vector != "ray":
        keys.add("ray")
    if not env.multi_agent and not env.agent_id and not env.global_state:
        keys |= {"agent_id", "global_state"}
    return keys


def build_params(spec: AlgorithmSpec, values: Mapping[str, Any], *, num_update_steps: int = 1) -> Any:
    """The algorithm's params object from resolved values; ``"linear"`` schedules decay over
    ``num_update_steps`` update steps."""
    kwargs = dict(values)
    enums = enum_fields(spec.params_cls)
    for key, value in values.items():
        if key in enums:
            kwargs[key] = enums[key](value)
        elif value == "linear":
            kwargs[key] = LinearSchedule(num_update_steps=max(1, num_update_steps))
        elif value == "constant":
            kwargs[key] = None
    return spec.params_cls(**kwargs)


# ---------------------------------------------------------------------------- sections
def _check_sections(data: Mapping[str, Any], spec: AlgorithmSpec, source: str) -> None:
    if spec.family is Family.OFFLINE and "buffer" in data:
        raise ExperimentError(
            f"{source}: buffer: {spec.name} is an offline algorithm; it learns from `dataset` (a saved "
            f"buffer or a Minari dataset), so remove the buffer section."
        )
    if spec.family is not Family.OFFLINE and data.get("dataset") is not None:
        raise ExperimentError(
            f"{source}: dataset: {spec.name} is an {spec.family} algorithm that collects its own data; "
            f"datasets are for the offline algorithms ({', '.join(offline_names())})."
        )


def _resolve_params(
    spec: AlgorithmSpec, values: Mapping[str, Any], source: str, prefix: str = ""
) -> dict[str, Any]:
    allowed = value_fields(spec.params_cls)
    where = f"{prefix}algorithm.params ({spec.params_cls.__name__})"
    resolved = {key: default for key, (_, default) in allowed.items()}
    for key, value in values.items():
        resolved[key] = _validate_value(allowed, key, value, where, source)
    try:
        build_params(spec, resolved)
    except ConfigurationError as error:
        raise ExperimentError(f"{source}: {prefix}algorithm.params: {error}") from None
    return resolved


def _resolve_trainer(spec: AlgorithmSpec, values: Mapping[str, Any], source: str) -> dict[str, Any]:
    allowed = trainer_fields(spec.family)
    params_cls = TRAINER_PARAMS[spec.family]
    for key in values:
        if key in SET_ELSEWHERE:
            raise ExperimentError(
                f"{source}: trainer.{key}: an experiment file sets checkpoints in one place: "
                f"{SET_ELSEWHERE[key]} (see docs/checkpoints.md); move the value there."
            )
        if key not in allowed:
            other = [f for f in Family if f is not spec.family and key in trainer_fields(f)]
            if other:
                raise ExperimentError(
                    f"{source}: trainer.{key}: a field of the {' and '.join(other)} trainer, but {spec.name} "
                    f"runs on the {spec.family} trainer ({params_cls.__name__}): {', '.join(allowed)}."
                )
    resolved = {key: default for key, (_, default) in allowed.items()}
    for key, value in values.items():
        resolved[key] = _validate_value(allowed, key, value, f"trainer ({params_cls.__name__})", source)
    return resolved


def _resolve_log_intervals(spec: AlgorithmSpec, values: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Every ``LogIntervals`` field as a number: the file's, else the trainer family's default."""
    allowed = value_fields(LogIntervals)
    defaults = family_log_intervals(spec.family is Family.ON_POLICY)
    given = {
        key: _validate_value(allowed, key, value, "log_intervals (LogIntervals)", source)
        for key, value in values.items()
    }
    return {key: getattr(defaults, key) if given.get(key) is None else given[key] for key in allowed}


def _validate_value(
    allowed: Mapping[str, tuple[Any, Any]], key: str, value: Any, where: str, source: str
) -> Any:
    section = where.split(" ", maxsplit=1)[0]
    if key not in allowed:
        raise ExperimentError(
            f"{source}: {section}.{key}: unknown key{did_you_mean(key, allowed)}; allowed in {where}: "
            f"{', '.join(allowed)}."
        )
    kind = allowed[key][0]
    try:
        return adapter(kind).validate_python(value)
    except ValidationError as error:
        reason = error.errors()[0]["msg"]
        raise ExperimentError(
            f"{source}: {section}.{key}: {short_repr(value)} is not allowed ({reason}); expected "
            f"{expected(kind)}."
        ) from None


def _validate_model(model: type[Section], values: Mapping[str, Any], where: str, source: str) -> Section:
    section = where.split(" ", maxsplit=1)[0]
    for key in values:
        if key not in model.model_fields:
            allowed = ", ".join(model.model_fields) or "none"
            raise ExperimentError(
                f"{source}: {section}.{key}: unknown key{did_you_mean(key, model.model_fields)}; allowed in "
                f"{where}: {allowed}."
            )
    try:
        return model.model_validate(dict(values))
    except ValidationError as error:
        raise ExperimentError(_describe(error, source, prefix=f"{section}.")) from None


# ---------------------------------------------------------------------------- helpers
def _check_keys(data: Any, model: type[BaseModel], path: str, source: str) -> None:
    """Unknown keys anywhere in the fixed sections: an error with a did-you-mean suggestion."""
    if not isinstance(data, Mapping):
        return
    for key, value in data.items():
        if key not in model.model_fields:
            allowed = ", ".join(model.model_fields)
            raise ExperimentError(
                f"{source}: {path}{key}: unknown key{did_you_mean(str(key), model.model_fields)}; allowed"
                f"{' in ' + path.rstrip('.') if path else ''}: {allowed}."
            )
        for child, item, where in _children(model.model_fields[key].annotation, value, f"{path}{key}"):
            _check_keys(item, child, f"{where}.", source)


def _children(annotation: Any, value: Any, path: str) -> list[tuple[type[BaseModel], Any, str]]:
    """The sub-models of a field's value: a section, a list of sections, or one of a union by ``kind``."""
    candidates = [a for a in _flatten(annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
    if not candidates:
        return []
    if typing.get_origin(annotation) is dict:
        items = value.items() if isinstance(value, Mapping) else []
        return [(m, item, f"{path}.{k}") for k, item in items if (m := _pick(candidates, item)) is not None]
    if typing.get_origin(annotation) is list or (
        isinstance(value, list) and any(typing.get_origin(a) is list for a in typing.get_args(annotation))
    ):
        items = list(enumerate(value)) if isinstance(value, list) else []
        return [(m, item, f"{path}[{i}]") for i, item in items if (m := _pick(candidates, item)) is not None]
    model = _pick(candidates, value)
    return [] if model is None else [(model, value, path)]


def _flatten(annotation: Any) -> list[Any]:
    args = typing.get_args(annotation)
    if not args:
        return [annotation]
    return [leaf for arg in args for leaf in _flatten(arg)]


def _pick(candidates: list[type[BaseModel]], value: Any) -> type[BaseModel] | None:
    if len(candidates) == 1:
        return candidates[0]
    kind = value.get("kind") if isinstance(value, Mapping) else None
    for model in candidates:
        if model.model_fields.get("kind") is not None and model.model_fields["kind"].default == kind:
            return model
    return None  # an unknown kind: pydantic's error names the allowed ones


def _describe(error: ValidationError, source: str, prefix: str = "") -> str:
    lines = []
    for item in error.errors():
        loc = ".".join(str(part) for part in item["loc"])
        where = f"{prefix}{loc}: " if loc else prefix and f"{prefix.rstrip('.')}: "
        message = item["msg"]
        given = item.get("input")
        got = "" if isinstance(given, Mapping) else f" (got {given!r})"  # a section: the message names it
        lines.append(f"{source}: {where}{message}{got}")
    return "\n".join(lines)

"""Generate docs/params.md from the params dataclasses' source.

The source is read with ``ast`` (nothing is imported), so the page shows exactly what the code declares:
each class's docstring, and a table of its fields with their annotation, default and the string literal
that sits right under the field (its description).

Usage::

    python scripts/gen_params_doc.py           # (re)write docs/params.md
    python scripts/gen_params_doc.py --check   # exit 1 if docs/params.md is stale
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "params.md"


@dataclass(frozen=True)
class Section:
    """One part of the page: classes taken from one module."""

    title: str
    intro: str
    module: str
    """path of the module, relative to the repository root"""
    classes: tuple[str, ...] | None
    """the classes to document, in this order; None: every dataclass of the module, in source order"""


SECTIONS = (
    Section(
        title="Trainer parameters",
        intro=(
            "`TrainerParams` → `OnlineTrainerParams` → `OnPolicyTrainerParams` / `OffPolicyTrainerParams`; "
            "`TrainerParams` → `OfflineTrainerParams`. A class takes its own fields and every field of "
            "the classes above it. All are frozen, keyword-only dataclasses validated when built; an "
            "invalid value raises `tshtrain.errors.ConfigurationError` (a `ValueError`)."
        ),
        module="tshtrain/trainer/params.py",
        classes=None,
    ),
    Section(
        title="Algorithm hyperparameters",
        intro="Frozen, keyword-only dataclasses passed to the algorithm (or policy) constructors.",
        module="tshtrain/algorithm/algos/reinforce.py",
        classes=("ReinforceParams",),
    ),
    Section(title="", intro="", module="tshtrain/algorithm/algos/dqn.py", classes=("DQNParams",)),
    Section(title="", intro="", module="tshtrain/algorithm/blocks/policies.py", classes=("EpsilonSchedule",)),
    Section(title="", intro="", module="tshtrain/algorithm/algos/bc.py", classes=("BCParams",)),
    Section(title="", intro="", module="tshtrain/algorithm/blocks/onpolicy.py", classes=("ActorCriticParams",)),
    Section(title="", intro="", module="tshtrain/algorithm/algos/a2c.py", classes=("A2CParams",)),
    Section(title="", intro="", module="tshtrain/algorithm/algos/ppo.py", classes=("PPOParams",)),
    Section(title="", intro="", module="tshtrain/algorithm/blocks/schedules.py", classes=("LinearSchedule",)),
    Section(
        title="",
        intro="",
        module="tshtrain/algorithm/blocks/offpolicy_actor_critic.py",
        classes=("OffPolicyActorCriticParams",),
    ),
    Section(title="", intro="", module="tshtrain/algorithm/algos/ddpg.py", classes=("DDPGParams",)),
    Section(
        title="",
        intro="",
        module="tshtrain/algorithm/algos/td3.py",
        classes=("TwinDelayedParams", "TD3Params"),
    ),
    Section(title="", intro="", module="tshtrain/algorithm/algos/sac.py", classes=("SACParams",)),
    Section(title="", intro="", module="tshtrain/algorithm/algos/discrete_sac.py", classes=("DiscreteSACParams",)),
    Section(title="", intro="", module="tshtrain/algorithm/algos/cql.py", classes=("CQLParams",)),
    Section(title="", intro="", module="tshtrain/algorithm/algos/td3_bc.py", classes=("TD3BCParams",)),
    Section(title="", intro="", module="tshtrain/algorithm/algos/discrete_cql.py", classes=("DiscreteCQLParams",)),
    Section(title="", intro="", module="tshtrain/algorithm/blocks/trust_region.py", classes=("TrustRegionParams",)),
    Section(title="", intro="", module="tshtrain/algorithm/algos/npg.py", classes=("NPGParams",)),
    Section(title="", intro="", module="tshtrain/algorithm/algos/trpo.py", classes=("TRPOParams",)),
    Section(title="", intro="", module="tshtrain/algorithm/algos/c51.py", classes=("C51Params",)),
    Section(title="", intro="", module="tshtrain/algorithm/algos/qrdqn.py", classes=("QuantileParams",)),
    Section(title="", intro="", module="tshtrain/algorithm/algos/iqn.py", classes=("IQNSampling",)),
    Section(title="", intro="", module="tshtrain/algorithm/algos/bcq.py", classes=("BCQParams",)),
    Section(title="", intro="", module="tshtrain/algorithm/algos/redq.py", classes=("REDQParams",)),
    Section(title="", intro="", module="tshtrain/algorithm/algos/iql.py", classes=("IQLParams",)),
    Section(title="", intro="", module="tshtrain/algorithm/algos/discrete_crr.py", classes=("DiscreteCRRParams",)),
    Section(
        title="", intro="", module="tshtrain/algorithm/algos/imitation.py", classes=("OffPolicyImitationParams",)
    ),
    Section(title="", intro="", module="tshtrain/algorithm/algos/gail.py", classes=("GAILParams",)),
    Section(title="", intro="", module="tshtrain/algorithm/algos/icm.py", classes=("ICMParams",)),
    Section(
        title="",
        intro="",
        module="tshtrain/algorithm/value_decomposition.py",
        classes=("ValueDecompositionParams",),
    ),
    Section(
        title="Checkpoint parameters",
        intro="`TrainerParams.checkpoint`: automatic checkpoints (see checkpoints.md).",
        module="tshtrain/checkpoint/params.py",
        classes=("CheckpointParams",),
    ),
)


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    default: str | None
    """source text of the default; None: the field is required"""
    description: str


@dataclass(frozen=True)
class ParamsClass:
    name: str
    bases: tuple[str, ...]
    docstring: str
    fields: tuple[Field, ...]
    module: str


def _is_dataclass(node: ast.ClassDef) -> bool:
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name == "dataclass":
            return True
    return False


_ROLE = re.compile(r":(?:class|meth|func|attr|data|mod):`~?([^`]+)`")


def _markdown(text: str) -> str:
    """Docstring markup (reST literals and roles) as Markdown code spans."""
    return _ROLE.sub(r"`\1`", text.replace("``", "`"))


def _one_line(text: str) -> str:
    """A docstring's lines joined into one (for a table cell)."""
    return " ".join(line.strip() for line in text.strip().splitlines() if line.strip())


def _source(source: str, node: ast.expr) -> str:
    """The expression as written (``1e-3`` stays ``1e-3``), on one line."""
    text = ast.get_source_segment(source, node) or ast.unparse(node)
    return " ".join(text.split())


def _fields(node: ast.ClassDef, source: str) -> tuple[Field, ...]:
    fields: list[Field] = []
    body = node.body
    for i, stmt in enumerate(body):
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        nxt = body[i + 1] if i + 1 < len(body) else None
        description = ""
        if (
            isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            description = _markdown(_one_line(nxt.value.value))
        fields.append(
            Field(
                name=stmt.target.id,
                type=_source(source, stmt.annotation),
                default=None if stmt.value is None else _source(source, stmt.value),
                description=description,
            )
        )
    return tuple(fields)


def read_classes(section: Section) -> list[ParamsClass]:
    """The documented classes of one section's module, parsed from its source."""
    source = (ROOT / section.module).read_text(encoding="utf-8")
    tree = ast.parse(source)
    found = {
        node.name: ParamsClass(
            name=node.name,
            bases=tuple(ast.unparse(b) for b in node.bases),
            docstring=_markdown(ast.get_docstring(node) or ""),
            fields=_fields(node, source),
            module=section.module,
        )
        for node in tree.body
        if isinstance(node, ast.ClassDef) and _is_dataclass(node)
    }
    if section.classes is None:
        return list(found.values())
    missing = [name for name in section.classes if name not in found]
    if missing:
        raise SystemExit(f"gen_params_doc: {section.module} has no dataclass named {', '.join(missing)}.")
    return [found[name] for name in section.classes]


def _cell(text: str) -> str:
    """Markdown-table-safe text (pipes escaped, also inside code spans, as GFM requires)."""
    return text.replace("|", "\\|")


def _code(text: str) -> str:
    return f"`{_cell(text)}`"


def render_class(cls: ParamsClass) -> list[str]:
    lines = [f"### `{cls.name}`", ""]
    where = f"Defined in `{cls.module}`"
    if cls.bases:
        where += "; also takes every field of " + ", ".join(f"`{b}`" for b in cls.bases)
    lines += [where + ".", ""]
    if cls.docstring:
        lines += [cls.docstring, ""]
    lines += ["| field | type | default | description |", "| --- | --- | --- | --- |"]
    for f in cls.fields:
        default = "*required*" if f.default is None else _code(f.default)
        lines.append(f"| `{f.name}` | {_code(f.type)} | {default} | {_cell(f.description)} |")
    lines.append("")
    return lines


CONSTRAINTS_INTRO: tuple[str, ...] = (
    "## Constrained number types",
    "",
    "A field's type says what it accepts. The constrained types are declared once, in "
    "`tshtrain/constraints.py`, and checked by `validate_fields(self)` at the start of each params "
    "class's `__post_init__`; the experiment files (`tshtrain.config`) derive their schema from the same "
    "annotations, so a bound holds alike for Python users and for experiment files.",
    "",
    "| type | accepts |",
    "| --- | --- |",
    "| `PositiveInt` | an int >= 1 |",
    "| `NonNegativeInt` | an int >= 0 |",
    "| `PositiveFloat` | a finite number > 0 |",
    "| `NonNegativeFloat` | a finite number >= 0 |",
    "| `UnitFloat` | a number in [0, 1] |",
    "| `OpenUnitFloat` | a number in (0, 1] |",
    "| `FiniteFloat` | any finite number |",
    "",
    "Whatever its constraint, an `int` field refuses bools and floats (`True`, `2.0`), a `float` field "
    "refuses bools, NaN and ±infinity, a `bool` field takes `True` / `False` only, and `T \\| None` also "
    "takes None. An error names the class, the field, what is allowed and the value: "
    "`OffPolicyTrainerParams.update_step_num_gradient_steps_per_sample must be a finite number > 0, got "
    "nan.` Rules that join several fields are written out in `__post_init__`.",
    "",
)
"""the page's explanation of the constrained number types of tshtrain/constraints.py"""


def render() -> str:
    """The full text of docs/params.md."""
    lines = [
        "<!-- Generated by scripts/gen_params_doc.py from the source; do not edit by hand. -->",
        "<!-- Regenerate with: python scripts/gen_params_doc.py -->",
        "",
        "# Parameter reference",
        "",
        "Every parameter object of tshtrain, as declared in the code. For what the words *epoch*, "
        "*training step* and *collection step* mean, see [concepts](concepts.md); for the algorithms, "
        "see [algorithms](algorithms.md).",
        "",
        *CONSTRAINTS_INTRO,
    ]
    for section in SECTIONS:
        if section.title:
            lines += [f"## {section.title}", ""]
        if section.intro:
            lines += [section.intro, ""]
        for cls in read_classes(section):
            lines += render_class(cls)
    return "\n".join(lines).rstrip("\n") + "\n"


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate docs/params.md from the params dataclasses.")
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/params.md is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else None
        if current != text:
            print(
                f"{_shown(OUTPUT)} is stale; run: python scripts/gen_params_doc.py",
                file=sys.stderr,
            )
            return 1
        print(f"{_shown(OUTPUT)} is up to date.")
        return 0
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {_shown(OUTPUT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

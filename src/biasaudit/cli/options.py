"""Command-line options generated from the pydantic models they set.

Every field of a spec (or of fan-out's or a ``score`` command's options) is one
option: ``--field-name`` (or as its :class:`~biasaudit.engine.options.Flag`
says), its choices and bounds from the field's type and constraints, its help
from the field's description and default. An option left out keeps the spec's
value, so a value is written once: on the field.
"""

from __future__ import annotations

import types
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
import click
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from biasaudit.engine.options import Flag

__all__ = ["field_options", "given", "merged_options"]


def given(values: dict[str, Any]) -> dict[str, Any]:
    """The options the user gave: unset ones (None, or no repeated value) dropped."""
    return {name: value for name, value in values.items() if value is not None and value != ()}


def field_options(
    model: type[BaseModel], *, skip: Collection[str] = (), required: bool = True
) -> list[click.Option]:
    """One option for each field of ``model`` that the command line can set.

    ``required``: a field without a default is a required option (a task's own
    command); False leaves that to the spec (``run SPEC.yaml``).
    """
    options = []
    for name, field in _own_first(model):
        flag = _flag(field)
        if name in skip or not flag.command_line or _click_type(field) is None:
            continue
        options.append(_option(name, field, flag, required=required and field.is_required()))
    return options


def merged_options(
    models: Iterable[type[BaseModel]], *, skip: Collection[str] = (), required: bool = False
) -> list[click.Option]:
    """The options of every model, once each. A field the models declare alike is one
    option (``required``: required where every model requires it); choices that differ
    are joined; any other difference becomes plain text, checked by the spec it lands
    in."""
    found: dict[str, list[tuple[FieldInfo, Flag]]] = {}
    models = list(models)
    for model in models:
        for name, field in _own_first(model):
            flag = _flag(field)
            if name in skip or not flag.command_line or _click_type(field) is None:
                continue
            found.setdefault(name, []).append((field, flag))
    options = []
    for name, declared in found.items():
        field, flag = declared[0]
        everywhere = len(declared) == len(models)
        needed = required and everywhere and all(f.is_required() for f, _ in declared)
        if all(_signature(f) == _signature(field) for f, _ in declared):
            option = _option(name, field, flag, required=needed)
            descriptions = list(dict.fromkeys((f.description or "").strip() for f, _ in declared))
            if len(descriptions) > 1:  # one option, several meanings: each one's words
                option.help = " / ".join(d for d in descriptions if d)
            options.append(option)
            continue
        types = [_click_type(f) for f, _ in declared]
        if all(isinstance(t, click.Choice) for t in types):
            choices = list(dict.fromkeys(c for t in types for c in t.choices))
            descriptions = list(dict.fromkeys((f.description or "").strip() for f, _ in declared))
            options.append(
                click.Option(
                    [flag.name or "--" + name.replace("_", "-"), name],
                    type=click.Choice(choices),
                    required=needed,
                    help=" / ".join(d for d in descriptions if d),
                )
            )
            continue
        option = _option(name, field, flag, required=needed, loose=True)
        option.type = _common_type(types)
        descriptions = list(dict.fromkeys((f.description or "").strip() for f, _ in declared))
        option.help = " / ".join(d for d in descriptions if d)
        options.append(option)
    return options


def _own_first(model: type[BaseModel]) -> list[tuple[str, FieldInfo]]:
    """The fields of ``model``, its own before those it inherits (a task's options lead
    its help; the model and engine options every run takes follow)."""

    def depth(name: str) -> int:
        owners = [i for i, cls in enumerate(model.__mro__) if name in vars(cls).get(
            "__annotations__", {})]  # fmt: skip
        return owners[0] if owners else len(model.__mro__)

    fields = list(model.model_fields.items())
    return sorted(fields, key=lambda item: depth(item[0]))


def _flag(field: FieldInfo) -> Flag:
    return next((item for item in field.metadata if isinstance(item, Flag)), Flag())


def _signature(field: FieldInfo) -> str:
    return repr((field.annotation, _bounds(field), field.default))


def _common_type(types: Sequence[Any]) -> Any:
    """The click type that fits every variant's values: an integer where each takes an
    integer, a number where each takes a number (the spec checks each one's bounds),
    else text."""
    if all(isinstance(t, click.IntRange) for t in types):
        return click.INT
    if all(isinstance(t, click.IntRange | click.FloatRange) for t in types):
        return click.FLOAT
    return click.STRING


def _metavar(field: FieldInfo) -> str | None:
    """What a text option takes, where click would say only TEXT: ``A,B`` for a list,
    ``N|median`` for a number or a word."""
    members = _members(field.annotation)
    if get_origin(members[0]) is tuple or _flag(field).multiple:
        return None if _flag(field).multiple else "A,B,..."
    shown = []
    for member in members:
        if get_origin(member) is Literal:
            shown += [str(value) for value in get_args(member)]
        elif member is int:
            shown.append("N")
        elif member is float:
            shown.append("X")
        elif get_origin(member) is tuple:
            shown.append("A,B,...")
    return "|".join(shown) if len(members) > 1 and shown else None


def _option(
    name: str, field: FieldInfo, flag: Flag, *, required: bool, loose: bool = False
) -> click.Option:
    names = [flag.name or "--" + name.replace("_", "-")]
    if flag.short:
        names.append(flag.short)
    click_type = click.STRING if loose else _click_type(field)
    is_flag = click_type is bool
    # Unset options stay None (a flag too), so that they keep the spec's value.
    unset: dict[str, Any] = {"is_flag": True, "default": None} if is_flag else {"type": click_type}
    metavar = flag.metavar
    if metavar is None and click_type is click.STRING and not loose:
        metavar = _metavar(field)
    return click.Option(
        [*names, name],
        multiple=flag.multiple,
        required=required,
        metavar=metavar,
        help=_help(field, show_default=not loose and not required),
        **unset,
    )


def _help(field: FieldInfo, *, show_default: bool) -> str:
    text = (field.description or "").strip()
    default = field.default
    if (
        not show_default
        or "[default" in text
        or any(default is unset for unset in (None, False, PydanticUndefined))
    ):
        return text
    if isinstance(default, tuple):
        default = ",".join(str(part) for part in default)
    return f"{text} [default: {default}]".strip()


def _bounds(field: FieldInfo) -> dict[str, Any]:
    bounds: dict[str, Any] = {}
    for item in field.metadata:
        for key in ("ge", "gt", "le", "lt"):
            if isinstance(item, getattr(annotated_types, key.capitalize())):
                bounds[key] = getattr(item, key)
    return bounds


def _members(annotation: Any) -> list[Any]:
    """The types of a union, ``None`` left out."""
    if get_origin(annotation) in (Union, types.UnionType):
        return [part for part in get_args(annotation) if part is not type(None)]
    return [annotation]


def _click_type(field: FieldInfo) -> Any:
    """The click type of the field's values; ``bool`` for a flag; None where the
    command line cannot give one (a mapping, a nested model)."""
    members = _members(field.annotation)
    if len(members) == 1 and get_origin(members[0]) is Literal:
        return click.Choice([str(value) for value in get_args(members[0])])
    if len(members) > 1 or _flag(field).multiple:
        # A list given as "a,b", a number or a word ('median', 'all'), repeated values:
        # text the spec's validators read.
        return click.STRING
    kind = members[0]
    bounds = _bounds(field)
    if kind is bool:
        return bool
    if kind is int:
        low, high = bounds.get("ge", bounds.get("gt")), bounds.get("le", bounds.get("lt"))
        return click.IntRange(low, high, min_open="gt" in bounds, max_open="lt" in bounds)
    if kind is float:
        low, high = bounds.get("ge", bounds.get("gt")), bounds.get("le", bounds.get("lt"))
        return click.FloatRange(low, high, min_open="gt" in bounds, max_open="lt" in bounds)
    if kind is Path:
        return click.Path(path_type=Path)
    if kind is str or get_origin(kind) is tuple:
        return click.STRING
    return None

"""Settings declared once, as dataclass fields whose ``metadata`` carries what every surface needs.

The vocabulary (the same keys on :class:`citeline.ingest.options.IndexSettings`, ``IngestOptions`` and
:class:`citeline.query.plan.SearchRequest`): ``help`` (the text of a CLI flag, a Prefect form field, a tool's argument),
``minimum`` and ``maximum`` (inclusive bounds of a number), ``choices`` (the values allowed), ``metavar`` (the CLI's
name for a value), ``cli`` and ``flow`` (whether the CLI and the Prefect flow offer the field) and ``env`` (an
environment variable the CLI reads the value from when the flag is not given). A field is made
with :func:`option`; a class checks its instances with :func:`check`; the surfaces build their own parameters from
the fields (``citeline.cli.common.option_of``: a click option, :func:`pydantic_field`: a pydantic field, which the
Prefect flow's run form and the server's schemas render).

This module imports nothing heavy (pydantic only inside :func:`pydantic_field`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import MISSING, Field, field, fields
from typing import Any, Literal, cast

from citeline.errors import SettingsError


def option(
    default: Any,
    help: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    choices: Sequence[str] | None = None,
    metavar: str | None = None,
    cli: bool = True,
    flow: bool = True,
    people_default: Any = MISSING,
    env: str | None = None,
    validate: Any = None,
    flags: Sequence[str] | None = None,
    form: Mapping[str, str] | bool = True,
) -> Any:
    """A declared field: its default, help text, bounds and choices, whether the CLI and the flow offer it, and the
    environment variable the CLI also reads it from (``env``).

    ``people_default``: the default of the surfaces people read (the CLI, the search page) where it differs from the
    programs' ``default`` (the Python API, the HTTP API, the retrievers): a search's ``group``. ``validate``: a
    function that checks a value and answers it as the field holds it (a class that validates itself calls it).
    ``flags``: the CLI's names for it where they are not ``--name-with-dashes`` (``-k``; ``--group/--flat``).
    ``form``: how a form shows it (the search page): ``label``, an on/off option's ``on`` and ``off`` wording, a
    number's ``step``, a text's or number's ``placeholder``, an input's ``type`` (``date``); False: not in the
    form."""
    meta: dict[str, Any] = {"help": help, "minimum": minimum, "maximum": maximum, "metavar": metavar}
    meta |= {"cli": cli, "flow": flow, "env": env}
    if people_default is not MISSING:
        meta["people_default"] = people_default
    if validate is not None:
        meta["validate"] = validate
    if flags is not None:
        meta["flags"] = tuple(flags)
    meta["form"] = dict(form) if not isinstance(form, bool) else form
    if choices is not None:
        meta["choices"] = tuple(choices)
    return field(default=default, metadata=meta)


def people_default(spec: Field[Any]) -> Any:
    """The default of a declared field on the surfaces people read (the CLI, the search page): its
    ``people_default`` when it has one, else its default."""
    return spec.metadata.get("people_default", spec.default)


#: The metadata of a field for the library's callers only (a reporter object, a switch of the flow's).
INTERNAL = {"cli": False, "flow": False}


def offered(cls: type, where: str | None = None) -> Iterator[Field[Any]]:
    """The declared fields of ``cls`` (those with a ``help``), or only those offered ``where`` (``"cli"`` or
    ``"flow"``), in declaration order."""
    for spec in fields(cls):
        if "help" in spec.metadata and (where is None or spec.metadata.get(where)):
            yield spec


def pick(cls: type, values: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of ``values`` that are fields of ``cls`` (a command's or flow's parameters)."""
    names = {spec.name for spec in fields(cls)}
    return {name: value for name, value in values.items() if name in names}


def value_type(cls: type, spec: Field[Any]) -> Any:
    """The type of a field of ``cls`` (its annotation, evaluated in the class's module)."""
    if not isinstance(spec.type, str):
        return spec.type
    return eval(spec.type, dict(vars(sys.modules[cls.__module__])))  # the class's own annotation text


def check(instance: Any) -> None:
    """Check every declared field of a (frozen) dataclass instance against its bounds and choices, raising a one-line
    :class:`SettingsError` naming the field; a list (from JSON or Python) given to a tuple field is kept as a tuple,
    and a lone string as a tuple of one."""
    for spec in fields(instance):
        meta, value = spec.metadata, getattr(instance, spec.name)
        if isinstance(value, list):
            object.__setattr__(instance, spec.name, value := tuple(value))
        if isinstance(value, str) and str(spec.type).startswith("tuple["):
            object.__setattr__(instance, spec.name, value := (value,))
        choices = meta.get("choices")
        if choices is not None and value is not None and value not in choices:
            raise SettingsError(f"{spec.name} must be one of {', '.join(map(str, choices))}, not {value!r}")
        if value is None or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        low, high = meta.get("minimum"), meta.get("maximum")
        if (low is not None and value < low) or (high is not None and value > high):
            bounds = f"between {low:g} and {high:g}" if high is not None else f"at least {low:g}"
            raise SettingsError(f"{spec.name} must be {bounds}, not {value}")


def pydantic_field(cls: type, spec: Field[Any]) -> tuple[Any, Any]:
    """A declared field as ``(annotation, pydantic.Field)`` for ``pydantic.create_model``: its default, bounds
    (``ge``/``le``), choices (a ``Literal``: an enum in the JSON schema, a choice in Prefect's form) and help text
    (the description); a tuple of strings becomes a list (what JSON carries)."""
    from pydantic import Field as PydanticField

    annotation, default = value_type(cls, spec), spec.default
    if default is MISSING:
        default = ...
    if isinstance(default, tuple):
        annotation, default = list[str], list(default)
    choices = spec.metadata.get("choices")
    if choices is not None:
        annotation = Literal[choices] if default is not None else Literal[choices] | None
    meta, make_field = spec.metadata, cast(Any, PydanticField)
    return annotation, make_field(default, description=meta["help"], ge=meta.get("minimum"), le=meta.get("maximum"))

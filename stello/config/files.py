"""Configuration files in TOML, read and checked with a pydantic model, errors that say where.

The gateway's profiles and skills files (and any later one) are read the same
way: a file that cannot be read, is not TOML or does not fit its model is one
error naming the file and every field at fault, raised as the caller's error
class so its start-up message stays its own. Each problem names the line
(and, for bad syntax, the column) it is on, the entry by its ``name`` and the
field as the file spells it, and what to do::

    profiles.toml line 12: profile "support", field context: must be one of
    'none', 'inherit' or 'compress', got 'all'

rather than pydantic's ``profiles.3.context``: an operator reads the file,
not the model. `tomllib` gives no positions, so `stello.config.toml_places` finds
them; where no line is known (an entry written inline) the entry is counted
from 1.
"""

from __future__ import annotations

import re
import tomllib
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from stello.config.toml_places import KeyPath, TomlPlaces

M = TypeVar("M", bound=BaseModel)

_AT = re.compile(
    r"^(?P<what>.*) \(at (?:line (?P<line>\d+), column (?P<column>\d+)|end of document)\)$"
)

_WANTED = {
    "string_type": "a string (in quotes)",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "list_type": "an array",
    "dict_type": "a table",
    "model_type": "a table",
    "model_attributes_type": "a table",
}
"""What a pydantic type error's kind asks for, in TOML's words."""

_TOML_TYPES = {
    bool: "boolean",
    int: "integer",
    float: "float",
    str: "string",
    list: "array",
    dict: "table",
}


def read_config_file(path: Path, what: str, error: type[ValueError]) -> str:
    """The text of the file at `path` (`what` names it in the error: "skills file").

    Raises:
        error: the file is missing, unreadable or not UTF-8.
    """
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"cannot read {what} {path}: {exc}") from exc


def parse_toml(
    text: str, model: type[M], source: str, error: type[ValueError], noun: str = "entry"
) -> M:
    """`text` as TOML validated by `model`; `source` names the file in the error, `noun`
    an entry of its arrays of tables ("profile").

    Raises:
        error: not TOML (its line and column), or every field the model refuses
            (``FILE line N: NOUN "name", field F: what to do``), ``; ``-separated.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(syntax_problem(text, source, exc)) from exc
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        places = TomlPlaces(text, source)
        problems = (
            Entry.of(places, data, err["loc"][:2], noun).problem(
                _inside(err["loc"]), _advice(err, model)
            )
            for err in exc.errors()
        )
        raise error("; ".join(problems)) from exc


def syntax_problem(text: str, source: str, exc: tomllib.TOMLDecodeError) -> str:
    """``FILE line N, column C: not valid TOML: WHAT: fix ...`` of `tomllib`'s error."""
    found = _AT.match(str(exc))
    if found is None:
        return f"{source}: not valid TOML: {exc}"
    what = found["what"]
    if found["line"] is None:
        last = text.count("\n") + (0 if text.endswith("\n") else 1)
        where = f"{source} line {max(last, 1)} (the end of the file)"
        advice = "the file ends inside something unfinished (a string, an array, a value)"
    else:
        where = f"{source} line {found['line']}, column {found['column']}"
        advice = "fix the syntax there"
    return f"{where}: not valid TOML: {what}: {advice}"


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of a configuration file (a ``[[profiles]]`` table), to say where a
    problem found in it is: after validation too, for checks that need every file."""

    places: TomlPlaces
    path: KeyPath
    """The entry's path (``("profiles", 2)``), or a top-level key's."""
    label: str
    """How messages name it: ``profile "support"``, ``profile 3 (no name, counting from
    1)``; "" for a top-level key."""

    @classmethod
    def of(cls, places: TomlPlaces, data: Mapping[str, Any], path: KeyPath, noun: str) -> Entry:
        """The entry at `path` of the parsed `data` (`path` may be a top-level key alone)."""
        if len(path) < 2 or not isinstance(path[1], int):
            return cls(places, path[:1], "")
        index = path[1]
        items = data.get(str(path[0]))
        item = items[index] if isinstance(items, list) and 0 <= index < len(items) else None
        name = item.get("name") if isinstance(item, dict) else None
        if isinstance(name, str) and name:
            return cls.named(places, path, noun, name)
        return cls(places, path, f"{noun} {index + 1} (no name, counting from 1)")

    @classmethod
    def named(cls, places: TomlPlaces, path: KeyPath, noun: str, name: str) -> Entry:
        """The entry at `path` whose ``name`` is `name` (``profile "support"``)."""
        return cls(places, path, f"{noun} {_quoted(name)}")

    def twice(self, first: int) -> str:
        """The problem of this entry, whose name the entry numbered `first` (from 0) of
        the same array has already: where that one is."""
        line = self.places.line((self.path[0], first))
        earlier = f"first on line {line}" if line is not None else f"first as number {first + 1}"
        return self.problem(
            ("name",), f"the name is defined twice ({earlier}): rename or remove one"
        )

    def problem(self, field: tuple[int | str, ...], text: str) -> str:
        """``FILE line N: LABEL, field FIELD: TEXT``, on the line of `field` (its path inside
        the entry: ``("skills", 1)`` is ``field skills, item 2``) when known."""
        named = _field_words(field)
        parts = [self.label, f"field {named}" if named else ""]
        subject = ", ".join(part for part in parts if part)
        if not subject:
            subject = f"key {self.path[0]}" if self.path else "the file"
        return f"{self.places.at(self.path + field)}: {subject}: {text}"


def named_entries(
    text: str,
    source: str,
    key: str,
    noun: str,
    names: Sequence[str],
    error: type[ValueError],
) -> list[Entry]:
    """The entries of the array of tables `key` (``[[profiles]]``), named by their `names`
    in file order, for problems found after validation.

    Raises:
        error: a name used twice (``FILE line N: NOUN "name", field name: the name is
            defined twice (first on line M): ...``).
    """
    places = TomlPlaces(text, source)
    first: dict[str, int] = {}
    entries: list[Entry] = []
    for index, name in enumerate(names):
        entry = Entry.named(places, (key, index), noun, name)
        if name in first:
            raise error(entry.twice(first[name]))
        first[name] = index
        entries.append(entry)
    return entries


def _quoted(name: str) -> str:
    """A name as the file could write it, in double quotes, cut to 64 characters."""
    cut = name if len(name) <= 64 else name[:64] + "..."
    return '"' + cut.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _inside(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """The part of a pydantic ``loc`` inside its entry (all but the top-level key for a
    key that is not an array of entries)."""
    return loc[2:] if len(loc) >= 2 and isinstance(loc[1], int) else loc[1:]


def _field_words(field: tuple[int | str, ...]) -> str:
    """A field's path as the file spells it (``skills, item 2``); "" for the entry itself."""
    return ", ".join(f"item {p + 1}" if isinstance(p, int) else str(p) for p in field)


def _advice(err: ErrorDetails, model: type[BaseModel]) -> str:
    """What is wrong with the value and what to do, in the words of the file's format."""
    kind, ctx, got = err["type"], err.get("ctx") or {}, err["input"]
    if kind == "missing":
        return "is required: add it"
    if kind == "extra_forbidden":
        known = ", ".join(_fields_at(model, err["loc"][:-1])) or "none"
        return f"is not a known field (known: {known}): remove it or correct its spelling"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')}, got {repr(got)[:80]}"
    if kind == "list_type" and isinstance(got, dict) and len(err["loc"]) == 1:
        key = err["loc"][0]
        return f"must be an array of tables: write each entry under [[{key}]], not [{key}]"
    if kind == "string_too_short" and ctx.get("min_length") == 1:
        return "must not be empty"
    if kind in _WANTED:
        return f"must be {_WANTED[kind]}, not a TOML {_toml_type(got)}"
    message = err["msg"].removeprefix("Value error, ")
    return message.replace("Input should be", "must be").replace("String should", "must")


def _toml_type(value: object) -> str:
    """The TOML name of a parsed value's type ("integer", "table")."""
    for kind, name in _TOML_TYPES.items():
        if isinstance(value, kind):
            return name
    return "date or time"


def _fields_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The fields of the (nested) model at `loc`: what an unknown key could have meant."""
    current: type[BaseModel] | None = model
    for part in loc:
        if isinstance(part, int) or current is None:
            continue
        field = current.model_fields.get(part)
        current = _model_in(field.annotation) if field is not None else None
    return list(current.model_fields) if current is not None else []


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model an annotation holds (``list[_Entry] | None`` -> ``_Entry``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        if (found := _model_in(arg)) is not None:
            return found
    return None

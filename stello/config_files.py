"""Configuration files in TOML, read and checked with a pydantic model, errors that say where.

The gateway's profiles and skills files (and any later one) are read the same
way: a file that cannot be read, is not TOML or does not fit its model is one
error naming the file and every field at fault, raised as the caller's error
class so its start-up message stays its own.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


def read_config_file(path: Path, what: str, error: type[ValueError]) -> str:
    """The text of the file at `path` (`what` names it in the error: "skills file").

    Raises:
        error: the file is missing, unreadable or not UTF-8.
    """
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"cannot read {what} {path}: {exc}") from exc


def parse_toml(text: str, model: type[M], source: str, error: type[ValueError]) -> M:
    """`text` as TOML validated by `model`; `source` names the file in the error.

    Raises:
        error: not TOML, or every field the model refuses (`path.to.field: why`).
    """
    try:
        return model.model_validate(tomllib.loads(text))
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{source}: not valid TOML: {exc}") from exc
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise error(f"{source}: {problems}") from exc

"""TOML configuration files: one error naming the file and every field at fault."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict

from stello.config_files import parse_toml, read_config_file


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    size: int = 0


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")

    entries: list[_Entry] = []


class FileError(ValueError):
    """The caller's own error class."""


class TestParseToml:
    def test_a_valid_file(self) -> None:
        """A document that fits the model is the model's value."""
        parsed = parse_toml('[[entries]]\nname = "a"\nsize = 2\n', _File, "f.toml", FileError)
        assert parsed.entries == [_Entry(name="a", size=2)]

    def test_not_toml(self) -> None:
        """Text that is not TOML names the file."""
        with pytest.raises(FileError, match=r"^f\.toml: not valid TOML: "):
            parse_toml("entries = [", _File, "f.toml", FileError)

    def test_every_field_at_fault_is_named(self) -> None:
        """Each refused field is listed by its path, in one error."""
        text = '[[entries]]\nsize = "x"\ncolour = 1\n'
        with pytest.raises(FileError) as caught:
            parse_toml(text, _File, "f.toml", FileError)
        message = str(caught.value)
        assert message.startswith("f.toml: ")
        for path in ("entries.0.name", "entries.0.size", "entries.0.colour"):
            assert path in message


class TestReadConfigFile:
    def test_missing(self, tmp_path: Path) -> None:
        """A missing file is the caller's error, naming what it is and where."""
        with pytest.raises(FileError, match=r"^cannot read skills file .*nope\.toml"):
            read_config_file(tmp_path / "nope.toml", "skills file", FileError)

    def test_not_utf8(self, tmp_path: Path) -> None:
        """A file that is not UTF-8 is the caller's error too, not a traceback."""
        path = tmp_path / "latin1.toml"
        path.write_bytes("name = 'caf\xe9'".encode("latin-1"))
        with pytest.raises(FileError, match=r"^cannot read profiles file "):
            read_config_file(path, "profiles file", FileError)

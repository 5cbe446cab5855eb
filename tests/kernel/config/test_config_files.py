"""TOML configuration files: one error naming the file and every field at fault."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict

from stello.config.files import parse_toml, read_config_file


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
        """Text that is not TOML names the file, the line and column `tomllib` found."""
        with pytest.raises(FileError) as raised:
            parse_toml('[[entries]]\nname = "a"\nsize 2\n', _File, "f.toml", FileError)
        assert str(raised.value) == (
            "f.toml line 3, column 6: not valid TOML: Expected '=' after a key in a key/value "
            "pair: fix the syntax there"
        )

    def test_not_toml_at_the_end(self) -> None:
        """A file that ends inside a value names its last line and says so."""
        with pytest.raises(FileError) as raised:
            parse_toml("\nentries = [", _File, "f.toml", FileError)
        assert str(raised.value).startswith("f.toml line 2 (the end of the file): not valid TOML:")

    def test_every_field_at_fault_is_named_with_its_line(self) -> None:
        """Each refused field is named as the file spells it, on its 1-based line, in its
        entry (by name, else counted from 1), with what to do; not pydantic's 0-based loc."""
        text = (
            '[[entries]]\nname = "a"\n\n[[entries]]\n# no name\nsize = "x"\ncolour = 1\n'
            '[[entries]]\nname = "c"\nsize = 1.5\n'
        )
        with pytest.raises(FileError) as raised:
            parse_toml(text, _File, "f.toml", FileError, "entry")
        assert str(raised.value).split("; ") == [
            "f.toml line 4: entry 2 (no name, counting from 1), field name: is required: add it",
            "f.toml line 6: entry 2 (no name, counting from 1), field size: must be an integer, "
            "not a TOML string",
            "f.toml line 7: entry 2 (no name, counting from 1), field colour: is not a known "
            "field (known: name, size): remove it or correct its spelling",
            'f.toml line 10: entry "c", field size: must be an integer, not a TOML float',
        ]

    def test_a_top_level_key(self) -> None:
        """A key outside the entries is named as a key, on its line."""
        with pytest.raises(FileError) as raised:
            parse_toml("# f\nentry = 1\n", _File, "f.toml", FileError)
        assert str(raised.value) == (
            "f.toml line 2: key entry: is not a known field (known: entries): remove it or "
            "correct its spelling"
        )

    def test_a_table_where_an_array_of_tables_is_wanted(self) -> None:
        """``[entries]`` (one bracket) for ``[[entries]]`` says which to write."""
        with pytest.raises(FileError) as raised:
            parse_toml('\n[entries]\nname = "a"\n', _File, "f.toml", FileError)
        assert str(raised.value) == (
            "f.toml line 2: key entries: must be an array of tables: write each entry under "
            "[[entries]], not [entries]"
        )

    def test_an_inline_entry_has_the_line_of_its_array(self) -> None:
        """Entries written inline are named by number, on the line where their array starts."""
        with pytest.raises(FileError) as raised:
            parse_toml('entries = [\n  {name = "a"},\n  {size = 1},\n]\n', _File, "f", FileError)
        assert str(raised.value) == (
            "f line 1: entry 2 (no name, counting from 1), field name: is required: add it"
        )


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

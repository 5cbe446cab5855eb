"""stello.formats.json_text: strict JSON from outside the process, or the ValueError its callers
handle."""

from __future__ import annotations

import json

import pytest

from stello.formats import json_text

DEEP = "[" * 100_000 + "]" * 100_000


class TestLoads:
    @pytest.mark.parametrize(
        ("text", "value"),
        [
            pytest.param('{"q": [1, 2.5, -0.0, 1e308, null, true]}', None, id="object"),
            pytest.param(b'{"q": "\\u00e9"}', {"q": "é"}, id="bytes"),
            pytest.param("[" * 100 + "]" * 100, None, id="nested-100"),
        ],
    )
    def test_json_reads_as_json_loads_does(self, text: str | bytes, value: object) -> None:
        """Strict JSON reads as Python's json reads it."""
        assert json_text.loads(text) == (json.loads(text) if value is None else value)

    @pytest.mark.parametrize(
        ("text", "match"),
        [
            pytest.param("not json", "Expecting value", id="not-json"),
            pytest.param(DEEP, "nested too deeply", id="nested-past-the-stack"),
            pytest.param(DEEP.encode(), "nested too deeply", id="nested-bytes"),
            pytest.param('{"a": NaN}', "NaN is not JSON", id="nan"),
            pytest.param('{"a": Infinity}', "Infinity is not JSON", id="infinity"),
            pytest.param("-Infinity", "-Infinity is not JSON", id="minus-infinity"),
            pytest.param('{"a": 1e999}', "larger than a double holds", id="beyond-a-double"),
            pytest.param(b'{"a": "\xff"}', "can't decode", id="not-utf-8"),
        ],
    )
    def test_anything_else_is_a_value_error(self, text: str | bytes, match: str) -> None:
        """Not JSON, NaN, an infinite number or nesting past the stack: a ValueError
        (Python's json raised RecursionError for the nesting, and read the numbers)."""
        with pytest.raises(ValueError, match=match):
            json_text.loads(text)


class TestRawDecode:
    def test_the_value_and_where_it_ends(self) -> None:
        """The value at `pos` and the index just past it."""
        assert json_text.raw_decode('x {"a": 1} y', 2) == ({"a": 1}, 10)

    @pytest.mark.parametrize(
        "text",
        [
            pytest.param(DEEP, id="nested-past-the-stack"),
            pytest.param('{"a": NaN}', id="nan"),
            pytest.param('{"a": -1e999}', id="beyond-a-double"),
        ],
    )
    def test_what_loads_refuses_it_refuses(self, text: str) -> None:
        """What `loads` refuses is a ValueError here too."""
        with pytest.raises(ValueError, match=r"nested too deeply|is not JSON|double"):
            json_text.raw_decode(text)


class TestDepth:
    """One nesting limit, `MAX_DEPTH`, whatever the caller (Python's own depended on the
    caller's stack: about 1,000 levels, less the frames above the read)."""

    def test_the_limit_reads_and_one_more_does_not(self) -> None:
        """512 levels read; 513 are a ValueError naming the limit, for text and bytes."""
        limit = json_text.MAX_DEPTH
        assert json_text.loads("[" * limit + "]" * limit) == json.loads("[" * limit + "]" * limit)
        deeper = '{"a": ' * limit + "[]" + "}" * limit
        for text in (deeper, deeper.encode(), deeper.encode("utf-16")):
            with pytest.raises(ValueError, match=f"at most {limit} levels"):
                json_text.loads(text)
        with pytest.raises(ValueError, match=f"at most {limit} levels"):
            json_text.raw_decode("x " + deeper, 2)

    def test_brackets_in_strings_do_not_count(self) -> None:
        """Brackets inside strings (escaped quotes too) are text, not nesting."""
        text = '{"a": "' + '\\"[{' * 1_000 + '"}'
        assert json_text.loads(text) == {"a": '"[{' * 1_000}

    def test_what_follows_the_value_is_not_counted(self) -> None:
        """raw_decode reads the value at pos; deep text after it is not that value's."""
        assert json_text.raw_decode("[[1]] " + "[" * 1_000, 0) == ([[1]], 5)

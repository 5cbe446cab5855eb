"""Where each key of a TOML document is: the lines errors about a configuration file name."""

from __future__ import annotations

import tomllib

from stello.config.toml_places import TomlPlaces, key_places

DOCUMENT = '''# a comment with [[profiles]] and name = "x"
[[profiles]]
name = "a"   # trailing [comment]
content = """
[[profiles]]
x = 1
""""
"dotted.name" = [
  "a", # ]
  [1, 2],
]

[[profiles]]
a.b = 1
'c d' = { e = 1 }
[[profiles.steps]]
z = 1

[table]
y = 2
'''


def test_keys_and_headers_are_placed() -> None:
    """Headers and keys get their 1-based line and column; strings, comments and arrays
    over several lines that look like keys or headers are not taken for them."""
    assert tomllib.loads(DOCUMENT)["profiles"][0]["content"] == '[[profiles]]\nx = 1\n"'
    assert key_places(DOCUMENT) == {
        ("profiles", 0): (2, 1),
        ("profiles", 0, "name"): (3, 1),
        ("profiles", 0, "content"): (4, 1),
        ("profiles", 0, "dotted.name"): (8, 1),
        ("profiles", 1): (13, 1),
        ("profiles", 1, "a", "b"): (14, 1),
        ("profiles", 1, "c d"): (15, 1),
        ("profiles", 1, "steps", 0): (16, 1),
        ("profiles", 1, "steps", 0, "z"): (17, 1),
        ("table",): (19, 1),
        ("table", "y"): (20, 1),
    }


def test_the_nearest_known_place_answers() -> None:
    """A key not in the file (a missing field) is placed at its entry; an unknown root not."""
    places = TomlPlaces(DOCUMENT, "p.toml")
    assert places.line(("profiles", 1, "name")) == 13
    assert places.line(("profiles", 1, "c d", "e")) == 15
    assert places.at(("profiles", 0, "name")) == "p.toml line 3"
    assert places.at(("elsewhere",)) == "p.toml"

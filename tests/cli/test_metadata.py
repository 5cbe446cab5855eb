"""Session metadata on the command line: root/fork --meta, meta, digests --where, show."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.suite import Suite
from tests.cli.test_commands import as_json, failed, ok
from tests.support.fixtures import TestSpace

pytestmark = pytest.mark.subprocess


@pytest.fixture(name="env")
def _env(suite: Suite, home: Path, space: TestSpace) -> dict[str, str]:
    return suite.env(home, space)


class TestMetadataCommands:
    async def test_export_and_import_keep_metadata(
        self, env: dict[str, str], tmp_path: Path
    ) -> None:
        """`export` writes each session's metadata and `import` restores it."""
        root = await as_json(env, "root", "--label", "r", "--meta", "user=alice")
        exported = tmp_path / "out.json"
        await ok(env, "export", root["id"], "-o", str(exported))
        assert json.loads(exported.read_text())["sessions"][0]["metadata"] == {"user": "alice"}
        made = (await as_json(env, "import", str(exported)))["imported"]
        assert await as_json(env, "meta", made[root["id"]]) == {"user": "alice"}

    async def test_set_change_filter_and_show(self, env: dict[str, str]) -> None:
        """Metadata given at root and fork, changed by `meta`, filters `digests --where` and
        shows in `show`; a bad key is one line naming the flag."""
        root = await as_json(env, "root", "--label", "r", "--meta", "user=alice")
        child = await as_json(
            env, "fork", root["id"], "--label", "c", "--meta", "ticket=T-1", "--copy-meta"
        )
        other = await as_json(env, "fork", root["id"], "--label", "o")
        assert await as_json(env, "meta", child["id"]) == {"ticket": "T-1", "user": "alice"}
        assert await as_json(env, "meta", other["id"]) == {}
        changed = await as_json(env, "meta", child["id"], "user=bob", "--remove", "ticket")
        assert changed == {"user": "bob"}
        assert await ok(env, "meta", child["id"]) == "user=bob\n"
        found = await as_json(env, "digests", "--where", "user=alice")
        assert [(d["id"], d["metadata"]) for d in found] == [(root["id"], {"user": "alice"})]
        assert [d["id"] for d in await as_json(env, "digests", "--roots")] == [root["id"]]
        assert [d["id"] for d in await as_json(env, "digests", "--parent", root["id"])] == [
            child["id"],
            other["id"],
        ]
        assert "metadata: user=bob" in await ok(env, "show", child["id"])
        line = await failed(env, "meta", child["id"], "bad key=1", code=2)
        assert line.startswith('stello meta: K=V "bad key": key must match'), line

    async def test_a_value_never_drives_the_terminal(self, env: dict[str, str]) -> None:
        """`meta` prints each value on its line with control characters escaped and line
        breaks as spaces (a value may hold them: metadata is data), as `show` and `digests`
        do; an ESC in a value recoloured the terminal, a line break read as another pair.
        `--json` keeps the value as it is."""
        value = "a\x1b[31mred\nuser=mallory"
        root = await as_json(env, "root", "--label", "r", "--meta", f"note={value}")
        assert await ok(env, "meta", root["id"]) == "note=a\\x1b[31mred user=mallory\n"
        assert await as_json(env, "meta", root["id"]) == {"note": value}

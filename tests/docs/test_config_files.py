"""README.md's example of the file `stello up` saves, `credentials.json`, is one the client
commands read as it says, and names every field the file holds.

The profiles, skills and prompts examples are read by the tests of their loaders
(tests/cli/suite.py, tests/gateway/llm/prompts/test_config.py); this one by
`stello_client.connection.credentials.load_credentials`, the client commands' and the SDK's reader.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from stello_client.connection.credentials import Credentials, load_credentials, save_credentials
from tests.docs.test_references import REPO

MARKER = "<!-- credentials example: read by tests/docs/test_config_files.py -->"


def readme_example(text: str) -> str:
    """The first json block after the marker."""
    after = text.partition(MARKER)[2]
    found = re.search(r"```json\n(.*?)```", after, flags=re.DOTALL)
    assert found, f"README.md lost its credentials.json example after {MARKER}"
    return found.group(1)


def test_the_credentials_example_reads_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    example = readme_example((REPO / "README.md").read_text())
    monkeypatch.setenv("STELLO_CONFIG_DIR", str(tmp_path))
    (tmp_path / "credentials.json").write_text(example)
    loaded = load_credentials()
    assert loaded is not None
    assert dataclasses.asdict(loaded) == json.loads(example)


def test_the_credentials_example_has_what_stello_up_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STELLO_CONFIG_DIR", str(tmp_path))
    written = json.loads(save_credentials(Credentials("s", "k")).read_text())
    example = json.loads(readme_example((REPO / "README.md").read_text()))
    assert list(example) == list(written)

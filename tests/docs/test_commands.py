"""Every `stello ...` command line README.md and docs/*.md show names a real command and only
flags it takes.

A flag renamed (`--archive` for `--archive-after`) or a command gone leaves a line a newcomer
copies and gets a usage error from. The lines are the inline spans and the lines of shell
blocks that start with `stello ` (after `VAR=value` assignments, `|`, `&&`, `;` or `$(`); each
is walked down `stello_cli.parser.build_parser()`'s subcommands, and each `--flag` must be one
of the command it reached (or of `stello` itself, as the connection flags are).
"""

from __future__ import annotations

import argparse
import functools
import re
from pathlib import Path

import pytest

from stello_cli.parser import build_parser
from tests.docs.test_references import DOCS, REPO

WORD = re.compile(r"--?[A-Za-z][\w-]*|[A-Za-z][\w-]*")
SEPARATORS = re.compile(r"\||&&|\$\(|;")
ASSIGNMENTS = re.compile(r"^(?:\w+=\S+\s+)+")
SHELL_BLOCK = re.compile(r"^```(?:bash|sh)\n(.*?)^```", flags=re.DOTALL | re.MULTILINE)


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def flags(parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings}


@functools.cache
def stello() -> argparse.ArgumentParser:
    return build_parser()


def command_lines(text: str) -> list[str]:
    """The `stello ...` command lines of `text`: in shell blocks (comments cut) and in spans."""
    pieces = [
        line.split("#")[0] for block in SHELL_BLOCK.findall(text) for line in block.splitlines()
    ]
    prose = re.sub(r"^```.*?^```", "", text, flags=re.DOTALL | re.MULTILINE)
    pieces += re.findall(r"`([^`\n]+)`", prose)
    lines = []
    for piece in pieces:
        for part in SEPARATORS.split(piece):
            line = ASSIGNMENTS.sub("", part.strip())
            if line.startswith("stello "):
                lines.append(line)
    return lines


def problem(line: str) -> str | None:
    """What in `line` the parser does not know, or None."""
    top = stello()
    parser, path = top, ["stello"]
    for word in WORD.findall(line)[1:]:
        if word.startswith("-"):
            if word not in flags(parser) | flags(top):
                return f"`{line}`: {' '.join(path)} has no {word}"
            continue
        commands = subcommands(parser)
        if word in commands:
            parser = commands[word]
            path.append(word)
        elif commands and parser is top:
            return f"`{line}`: no command {word}"
    return None


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: doc.relative_to(REPO).as_posix())
def test_every_command_line_parses(doc: Path) -> None:
    found = [problem(line) for line in command_lines(doc.read_text())]
    assert [text for text in found if text] == []


def test_a_stale_flag_or_command_is_reported() -> None:
    text = (
        "Run `stello root --lable x` or `stello frok A`, then\n\n"
        "```bash\nX=1 stello retention set --archive 3   # --nothing here\n"
        "ROOT=$(stello root -q) && stello tree --depth 1 --gateway h:1\n```\n"
    )
    assert [problem(line) for line in command_lines(text)] == [
        "`stello retention set --archive 3`: stello retention set has no --archive",
        None,
        None,
        "`stello root --lable x`: stello root has no --lable",
        "`stello frok A`: no command frok",
    ]

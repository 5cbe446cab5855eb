"""The statements of a SQL script, split where psql splits it (`split_statements`): what
`stello.db.migrate` runs one by one for a migration that runs outside a transaction."""

from __future__ import annotations

import re

_DOLLAR_TAG = re.compile(r"\$(?:[^\W\d]\w*)?\$")
_WORD = re.compile(r"[^\W\d][\w$]*")
_ROUTINE = (["CREATE", "FUNCTION"], ["CREATE", "PROCEDURE"])


def split_statements(sql: str) -> list[str]:
    """The statements of a migration file, each without its final semicolon.

    Semicolons inside comments, quoted strings and identifiers, dollar-quoted
    bodies, and `BEGIN ATOMIC ... END` bodies of a CREATE FUNCTION or
    PROCEDURE do not end a statement (psql splits a script so). Statements made
    only of comments and blanks are left out.
    """
    statements: list[str] = []
    start = i = 0
    words: list[str] = []  # the current statement's first words, OR REPLACE left out
    depth = 0  # BEGIN / CASE ... END nesting in a routine's SQL body
    while i < len(sql):
        if sql.startswith("--", i):
            end = sql.find("\n", i)
            i = len(sql) if end < 0 else end + 1
        elif sql.startswith("/*", i):
            i = _block_comment_end(sql, i)
        elif sql[i] in "'\"":
            i = _quoted_end(sql, i)
        elif sql[i] == "$" and not _after_word(sql, i) and (tag := _DOLLAR_TAG.match(sql, i)):
            end = sql.find(tag.group(0), tag.end())
            i = len(sql) if end < 0 else end + len(tag.group(0))
        elif not _after_word(sql, i) and (word := _WORD.match(sql, i)):
            i = word.end()
            keyword = word.group(0).upper()
            if len(words) < 2 and keyword not in ("OR", "REPLACE"):
                words.append(keyword)
            elif words in _ROUTINE and keyword in ("BEGIN", "CASE", "END"):
                depth += -1 if keyword == "END" else 1
        elif sql[i] == ";" and depth <= 0:
            statements.append(sql[start:i])
            start = i = i + 1
            words, depth = [], 0
        else:
            i += 1
    statements.append(sql[start:])
    return [text.strip() for text in statements if _has_code(text)]


def _after_word(sql: str, i: int) -> bool:
    """Whether sql[i] continues a word (a `$` there is no dollar quote, a letter no new word)."""
    return i > 0 and (sql[i - 1].isalnum() or sql[i - 1] in "_$")


def _block_comment_end(sql: str, i: int) -> int:
    """The index after the (nestable) /* comment */ that starts at i."""
    nesting, i = 1, i + 2
    while i < len(sql) and nesting:
        if sql.startswith("/*", i):
            nesting, i = nesting + 1, i + 2
        elif sql.startswith("*/", i):
            nesting, i = nesting - 1, i + 2
        else:
            i += 1
    return i


def _quoted_end(sql: str, i: int) -> int:
    """The index after the string or quoted identifier that starts at i (doubled quotes
    inside; backslash escapes in an E'' string)."""
    quote = sql[i]
    escapes = quote == "'" and i > 0 and sql[i - 1] in "eE" and not _after_word(sql, i - 1)
    i += 1
    while i < len(sql):
        if escapes and sql[i] == "\\":
            i += 2
        elif sql.startswith(quote * 2, i):
            i += 2
        elif sql[i] == quote:
            return i + 1
        else:
            i += 1
    return i


def _has_code(text: str) -> bool:
    """Whether `text` holds more than blanks and `--` comments."""
    return any(line.strip() and not line.lstrip().startswith("--") for line in text.splitlines())

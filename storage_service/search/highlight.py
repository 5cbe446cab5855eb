"""A hit's snippet and where the query matched in it, in code points.

The lexemes come from PostgreSQL's own normalisation of the query (the
`tsquery` as text, negated lexemes left out): a word of the content matches
when it starts with a lexeme (a stem, or a prefix), case ignored, read without
the marks migration 0035 removes from what is searched (`pass<U+200B>word` is
the word 'password', marked whole); a CJK lexeme (a bigram or a character)
matches where it occurs.
"""

from __future__ import annotations

import re

from storage_service.search.query import CJK, MARKS

SNIPPET_CHARS = 240
_BEFORE = 60
_LEXEME = re.compile(r"'((?:[^'\\]|''|\\.)*)'")
_WORD = re.compile(rf"(?:(?![{CJK}])\w)(?:(?![{CJK}])\w|[{MARKS}])*")
_MARK = re.compile(f"[{MARKS}]+")
_HAS_CJK = re.compile(rf"[{CJK}]")


def lexemes(tsquery: str) -> tuple[str, ...]:
    """The positive lexemes of a tsquery's text (`!'a'`, `!( ... )` skipped)."""
    found: list[str] = []
    depth = 0
    negated_at: list[int] = []
    i = 0
    while i < len(tsquery):
        c = tsquery[i]
        if c == "!":
            j = i + 1
            while j < len(tsquery) and tsquery[j] == " ":
                j += 1
            if j < len(tsquery) and tsquery[j] == "(":
                negated_at.append(depth)
                depth += 1
                i = j + 1
                continue
            m = _LEXEME.match(tsquery, j)
            i = m.end() if m else j
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if negated_at and negated_at[-1] == depth:
                negated_at.pop()
        elif c == "'":
            m = _LEXEME.match(tsquery, i)
            if m is None:
                break
            if not negated_at:
                text = m.group(1).replace("''", "'")
                found.append(re.sub(r"\\(.)", r"\1", text).lower())
            i = m.end()
            continue
        i += 1
    return tuple(dict.fromkeys(found))


def _ranges(content: str, terms: tuple[str, ...]) -> list[tuple[int, int]]:
    lowered = content.lower()
    spans: list[tuple[int, int]] = []
    words = [t for t in terms if not _HAS_CJK.search(t)]
    if words:
        for m in _WORD.finditer(lowered):
            if _MARK.sub("", m.group()).startswith(tuple(words)):
                spans.append(m.span())
    for term in (t for t in terms if _HAS_CJK.search(t)):
        at = lowered.find(term)
        while at >= 0:
            spans.append((at, at + len(term)))
            at = lowered.find(term, at + 1)
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def snippet(content: str, terms: tuple[str, ...]) -> tuple[str, int, list[tuple[int, int]]]:
    """Up to SNIPPET_CHARS of `content` around its first match: the text, where it
    starts in the content, and the matches in it (relative to the snippet)."""
    spans = _ranges(content, terms)
    start = max(0, spans[0][0] - _BEFORE) if spans else 0
    if spans and len(content) - start < SNIPPET_CHARS:
        start = max(0, len(content) - SNIPPET_CHARS)
    end = start + SNIPPET_CHARS
    inside = [
        (max(s, start) - start, min(e, end) - start) for s, e in spans if s < end and e > start
    ]
    return content[start:end], start, inside

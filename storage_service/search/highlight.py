"""A hit's snippet and where the query matched in it, in code points.

The lexemes come from PostgreSQL's own normalisation of the query (the
`tsquery` as text, negated lexemes left out): a word of the content matches
when it starts with a lexeme (a stem, or a prefix) or with the start of the words
a stem was rewritten from (`terms`: 'polici' marks "policy"), or, for a lexeme of one
letter or of digits (no stem: "e-mail" is 'e' and 'mail'), when it is that lexeme, case
ignored, read without
the marks migration 0035 removes from what is searched (`pass<U+200B>word` is
the word 'password', marked whole; since 0042 the combining diacritical marks too), and with
the full-width forms read as ASCII, as migration 0041 reads them (full-width `API` is the word
'api', marked at its own offsets: the mapping is one character for one), and the Latin letters
with diacritics as their base letters, as 0042 reads them (`Café` is the word 'cafe', marked
whole, also one for one: letters.py); a CJK lexeme (a bigram or a character)
matches where it occurs, and so does the symbol a symbol's lexeme names (migration 0043:
the lexeme of "🚀", the long s U+017F and 'ym1f680' since 0045, marks each "🚀", symbols.py).
A common English word (stop_words.py) is never marked: no record's vector holds it, so it
matched nothing ("the*" finds "theory" and marks it, not the "the" before it).
"""

from __future__ import annotations

import functools
import math
import re

from storage_service.search.query import CJK, COMBINING, MARKS, SEARCHED
from storage_service.search.stop_words import ENGLISH
from storage_service.search.symbols import SYMBOLS, symbol_of

SNIPPET_CHARS = 240
_BEFORE = 60
_LEXEME = re.compile(r"'((?:[^'\\]|''|\\.)*)'")
# A word: word characters but CJK and symbols (a symbol is a term of its own, as a CJK run)
# and `_`, which the records read as a space (migration 0038: "MAX_RETRIES" is two words).
_WORD = re.compile(rf"(?:(?![_{CJK}{SYMBOLS}])\w)(?:(?![_{CJK}{SYMBOLS}])\w|[{MARKS}{COMBINING}])*")
_MARK = re.compile(f"[{MARKS}]+")
# A term that matches where it occurs: CJK (bigrams, characters) and symbols.
_ANYWHERE = re.compile(rf"[{CJK}{SYMBOLS}]")
_VOWEL = re.compile(r"[aeiou]|(?<!^)y")  # Porter's vowel: "y" is one after a first letter


def _positive(tsquery: str) -> list[tuple[str, bool]]:
    """Each positive lexeme of a tsquery's text (`!'a'`, `!( ... )` skipped), and whether
    it is a prefix (`'a':*`)."""
    found: list[tuple[str, bool]] = []
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
                lexeme = re.sub(r"\\(.)", r"\1", text).lower()
                found.append((lexeme, tsquery.startswith(":*", m.end())))
            i = m.end()
            continue
        i += 1
    return found


def terms(tsquery: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What a hit's words are marked by: word starts, and whole words.

    The word starts are the positive lexemes of `tsquery`, and for each stem the English
    stemmer rewrote at its end, the start of the words it came from: a final `i` was a
    `y` ('polici' marks "policy"), a final `e` was dropped before `ing` ('use' marks
    "using"). A lexeme of one letter or of digits only is no stem (the "e" of "e-mail",
    the "3" of "3.14"): unless the query made it a prefix (`e*`), it marks itself only,
    not "every" or "30"."""
    starts: list[str] = []
    whole: list[str] = []
    for lexeme, prefix in _positive(tsquery):
        if symbol := symbol_of(lexeme):
            starts.append(symbol)
            continue
        if not prefix and _is_whole(lexeme):
            whole.append(lexeme)
            continue
        starts.append(lexeme)
        if more := _unstemmed(lexeme):
            starts.append(more)
    return tuple(dict.fromkeys(starts)), tuple(dict.fromkeys(whole))


def _is_whole(lexeme: str) -> bool:
    """A lexeme that marks a word equal to it only: one letter, or digits only."""
    return not _ANYWHERE.search(lexeme) and (len(lexeme) == 1 or lexeme.isdigit())


def _unstemmed(lexeme: str) -> str | None:
    """The word start the stemmer rewrote into `lexeme`'s end, or None (only stems of three
    characters or more: a shorter one would mark too many words). The English (Porter)
    stemmer makes either rewrite only when a vowel comes before the end it rewrites: 'use'
    came from "using", but 'the' from no word in "ing" ("thing" stays 'thing')."""
    if len(lexeme) < 3 or _ANYWHERE.search(lexeme) or not _VOWEL.search(lexeme[:-1]):
        return None
    if lexeme.endswith("i"):
        return lexeme[:-1] + "y"
    if lexeme.endswith("e"):
        return lexeme[:-1] + "ing"
    return None


def _finder(terms: tuple[str, ...]) -> re.Pattern[str]:
    """Where a term may match, in the content itself (not lowercased): each word term
    where no other word character is before it (case ignored, marks allowed between its
    characters), each CJK term anywhere. It finds every match _spans finds, and a few
    more (U+212A folds to `k` in a regular expression) that _spans then rejects.

    Word terms next to each other in `terms` share one word-start test (the same
    alternatives in the same order): compiling its class, which holds the CJK blocks,
    took 3 ms each time it was written."""
    alternatives: list[str] = []
    words: list[str] = []
    for term in terms:
        chars = [_char(c) for c in term]
        if _ANYWHERE.search(term):
            alternatives += _word_group(words)
            words = []
            alternatives.append("".join(chars))
        else:
            words.append(f"[{MARKS}]*".join(chars) or rf"(?-i:(?=[^\W_{CJK}{SYMBOLS}]))")
    alternatives += _word_group(words)
    return re.compile("|".join(alternatives), re.IGNORECASE)


def _word_group(bodies: list[str]) -> list[str]:
    """Word terms' bodies as one alternative after the word-start test and the marks a word
    may start with (the tatweel, a letter to Unicode: "ـكتب" is the word "كتب") (none: none)."""
    return [_WORD_START + f"[{MARKS}]*(?:" + "|".join(bodies) + ")"] if bodies else []


def _char(c: str) -> str:
    """What one character of a term matches in the content: itself, or a character that
    reads as it (SEARCHED: its full-width form, a letter with diacritics of either case)."""
    forms = _FORMS.get(c)
    return f"[{re.escape(c + forms)}]" if forms else re.escape(c)


def _forms() -> dict[str, str]:
    """For each character a searched text's characters read as (lowercased), those that
    read as it."""
    forms: dict[str, str] = {}
    for cp, to in SEARCHED.items():
        forms[chr(to).lower()] = forms.get(chr(to).lower(), "") + chr(cp)
    return forms


_FORMS = _forms()  # "e": "éèêë...ÉÈ...", " ": U+3000, "a": "ａＡàÀ..."
_finders = functools.lru_cache(maxsize=64)(_finder)
# Not after a word character but `_` (a text reads as one for one: `İ` reads as `I`, lowercase `i`).
_WORD_START = rf"(?-i:(?<![^\W_{CJK}{SYMBOLS}]))"
# Characters a region is cut at: in no word, no mark, and neither cased nor case-ignorable,
# so `str.lower()` of what is before them does not depend on what is after (the final
# sigma) and no word goes across them.
_STOP = re.compile(r"[\s\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7a3]")
_SCAN = 512


def _stop_before(content: str, at: int) -> int:
    """The last stop at or before `at`, or 0."""
    width = 64
    while True:
        low = max(0, at - width)
        last = None
        for m in _STOP.finditer(content, low, at + 1):
            last = m.start()
        if last is not None:
            return last
        if low == 0:
            return 0
        width *= 16


def _stop_after(content: str, at: int) -> int:
    """The first stop at or after `at`, or the content's length."""
    m = _STOP.search(content, at)
    return m.start() if m else len(content)


def _lower(text: str) -> str:
    """`text` with its full-width forms as ASCII and its Latin letters with diacritics as
    their base letters (SEARCHED: one character for one, so every offset stays; `İ`, whose
    lowercase alone is two code points, reads as `I`), lowercased: the one place a hit's words
    are read (a test counts what it reads)."""
    return text.translate(SEARCHED).lower()


def _spans(
    content: str, a: int, b: int, terms: tuple[str, ...], until: float, whole: tuple[str, ...]
) -> list[int]:
    """What the whole content lowercased matches between `a` and `b` (stops or the
    content's ends), starting before `until`: the matches' (start, end), in the
    content's code points, flattened. A word matches when it starts with one
    of `terms` or is one of `whole`, unless it is a common English word, which no record's
    vector holds (stop_words.ENGLISH: "the*" found "theory", not "the")."""
    lowered = _lower(content[a:b])
    spans: list[int] = []
    words = tuple(t for t in terms if not _ANYWHERE.search(t))
    if words or whole:
        for m in _WORD.finditer(lowered):
            if a + m.start() >= until:
                break
            word = _MARK.sub("", m.group())
            if (word.startswith(words) or word in whole) and word not in ENGLISH:
                spans += (a + m.start(), a + m.end())
    for term in (t for t in terms if _ANYWHERE.search(t)):
        at = lowered.find(term)
        while at >= 0 and a + at < until:
            spans += (a + at, a + at + len(term))
            at = lowered.find(term, at + 1)
    return spans


def _first(
    content: str, terms: tuple[str, ...], longest: int, whole: tuple[str, ...]
) -> tuple[int, int] | None:
    """The start of the first match (content's code points) and a stop
    before it, or None."""
    finder = _finders(terms + whole)  # a whole word is found where a word starts with it
    pos = 0
    while pos <= len(content) and (m := finder.search(content, pos)):  # past the end: -> end
        a = _stop_before(content, m.start())
        b = _stop_after(content, m.start() + _SCAN + longest)
        # A CJK term found past `until` may have one across `b` before it.
        until = b - longest if b < len(content) else math.inf
        spans = _spans(content, a, b, terms, until, whole)
        if spans:
            return a, min(spans[::2])
        pos = max(m.start() + 1, b - longest)
    return None


def snippet(
    content: str, terms: tuple[str, ...], whole: tuple[str, ...] = ()
) -> tuple[str, int, list[tuple[int, int]]]:
    """Up to SNIPPET_CHARS of `content` around its first match: the text, where it
    starts in the content, and the matches in it (relative to the snippet): the words
    that start with one of `terms` (CJK terms: anywhere) or are one of `whole`.

    Positions are the content's code points (its lowercase as _lower reads it has its
    length). The work is bounded by where the first match is, not by the content's size:
    a compiled regular expression finds where a term may match, and only the text
    around it and the snippet's window are lowercased and read word by word.
    """
    cjk = [len(t) for t in terms if _ANYWHERE.search(t)]
    longest = max(cjk, default=0)
    first = _first(content, terms, longest, whole) if terms or whole else None
    if first is None:
        return content[:SNIPPET_CHARS], 0, []
    a, s0 = first
    start = max(0, s0 - _BEFORE)
    if len(content) - start < SNIPPET_CHARS:
        start = max(0, len(content) - SNIPPET_CHARS)
    end = start + SNIPPET_CHARS
    flat = _spans(content, a, _stop_after(content, end + longest), terms, end, whole)
    spans = sorted(zip(flat[::2], flat[1::2], strict=True))
    merged: list[tuple[int, int]] = []
    for s, e in spans:
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(e, merged[-1][1]))
        else:
            merged.append((s, e))
    inside = [
        (max(s, start) - start, min(e, end) - start) for s, e in merged if s < end and e > start
    ]
    return content[start:end], start, inside

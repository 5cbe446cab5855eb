"""A user's search text as a `to_tsquery` text that is never a syntax error.

The syntax (documented in storage.proto, SearchRecords) is websearch-like:
words (AND), "phrases", -negation, `or`, and `word*` prefixes; CJK text
becomes the character bigrams migration 0019 indexes. Every lexeme is
emitted single-quoted with its quotes and backslashes escaped, so the text
`to_tsquery` receives is built only of operators this module writes:
whatever the user typed, PostgreSQL parses it. Normalisation (stemming,
stop words) stays PostgreSQL's, with the configuration of the index.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from stello.errors import InvalidArgument
from storage_service.search.letters import FOLD, LOWER, YO, runs
from storage_service.search.symbols import SYMBOL_RUN, SYMBOLS, lexeme

MAX_QUERY_CHARS = 1000
MAX_QUERY_TERMS = 64

# The CJK ranges of migration 0019's regular expressions, in Python's syntax.
CJK = (
    "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f"
    "\U00020000-\U0002fa1f"
)
# The zero-width and bidi marks and the soft hyphen that migration 0035's
# `stello_search_text` removes from what is searched, and since 0042 the combining
# diacritical marks (U+0300-U+036F: "e" and U+0301 is "e", as "é" is), and since 0043 the
# variation selectors (U+FE00-U+FE0F: "❤️" is "❤") and the combining marks for symbols
# (U+20D0-U+20FF: the keycap "1️⃣" is "1"), and since 0048 the Hebrew points and cantillation
# marks (VOWEL_MARKS: "שָׁלוֹם" is "שלום") and the Arabic harakat ("كَتَبَ" is "كتب"), and since 0049
# the Arabic tatweel and the Quranic annotation marks (QURANIC_MARKS: "كـتـب" is "كتب", "فِيهِۦ"
# is "فيه"), escaped as both Python's and PostgreSQL's regular expressions read them (the
# backfill's prefilter).
VOWEL_MARKS = r"\u0591-\u05bd\u05bf\u05c1\u05c2\u05c4\u05c5\u05c7\u064b-\u065f\u0670"
# The tatweel (U+0640, the kashida that stretches a word: a letter to Unicode, Lm, so a
# stretched word was a word of its own), the honorific signs and small letters above
# (U+0610-U+061A) and the Quranic marks of U+06D6-U+06ED (pause marks, small high and low
# letters, the end of ayah, the rub el hizb, the place of sajdah, the stops).
QURANIC_MARKS = r"\u0610-\u061a\u0640\u06d6-\u06ed"
MARKS = (
    "\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff\u0300-\u036f\ufe00-\ufe0f\u20d0-\u20ff"
    + VOWEL_MARKS
    + QURANIC_MARKS
)
_MARK = re.compile(f"[{MARKS}]+")
# Migration 0041's one-for-one mapping of the full-width forms (U+FF01-U+FF5E) to ASCII and
# of the ideographic space to a space: what input methods type reads as its ASCII word, and
# every offset stays (NFKC would change lengths: "ﬁ" is two characters).
FULL_WIDTH = {cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}
# What a searched text's characters read as, one for one: the full-width forms (0041) and the
# Latin letters with diacritics as their base letters (0042, letters.py: "Café" is "Cafe"), and
# the capital sharp s as the small one (0043: "STRAẞE" is "STRAßE", as its lowercase is where
# the database's locale lowercases it; the C locale does not), and since 0045 every other
# letter past ASCII with a lowercase as that lowercase, the final sigma as a sigma (LOWER:
# "ПРИВЕТ" is "привет", "ΟΔΟΣ" and "οδος" are "οδοσ", whatever the database's locale), and since
# 0048 "ё" and "Ё" as its plain letter U+0435 (YO: "Ёлка" is "елка").
SEARCHED = LOWER | FULL_WIDTH | FOLD | {0x1E9E: 0xDF} | YO
_ANGLE = str.maketrans("<>", "  ")


def _combining() -> str:
    """The combining marks below U+1F000 (Unicode's Mn, Mc and Me: the vowel signs, viramas
    and tone marks of the Indic, Thai, Burmese, ... scripts) as a character class's ranges.
    PostgreSQL's parser reads them as part of the word they follow ("हिन्दी" is one word);
    Python's `\\w` does not match them."""
    marks = [c for c in range(0x300, 0x1F000) if unicodedata.category(chr(c)).startswith("M")]
    return "".join(
        re.escape(chr(a)) + ("-" + re.escape(chr(b)) if b > a else "") for a, b in runs(marks)
    )


COMBINING = _combining()
# A word of the query: word characters but CJK and symbols, with the combining marks after
# its first (the words the database's parser reads).
_WORD = rf"(?:(?![{CJK}{SYMBOLS}])\w)(?:(?![{CJK}{SYMBOLS}])\w|[{COMBINING}])*"
_PIECE = re.compile(rf"[{CJK}]+|[{SYMBOLS}]+|{_WORD}")
_CJK_RUN = re.compile(rf"[{CJK}]+")
_TOKEN = re.compile(r'(-?)"([^"]*)"?|(-?)([^\s"]+)')


@dataclass(frozen=True, slots=True)
class Term:
    """One term of a query: its `to_tsquery` text, whether it is negated (-), and whether it
    is a prefix (`word*`: what it finds is no word of its own)."""

    text: str
    negated: bool
    prefix: bool


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """A parsed query: the `to_tsquery` text ("" = nothing can match) and its
    normalized form (what a page token binds); its alternatives (`a or b`), each its terms."""

    text: str
    canonical: str
    alternatives: tuple[tuple[Term, ...], ...] = ()

    def terms(self) -> tuple[str, ...]:
        """Each term's `to_tsquery` text, alternative after alternative."""
        return tuple(t.text for a in self.alternatives for t in a)

    def normalised(self, forms: tuple[tuple[str, str], ...]) -> str:
        """The query as a `tsquery`'s text from its terms' normalised forms (one per
        `terms()`: English, and the 'simple' configuration's). A term the English one leaves
        out (a common word: "the") is left out, but a prefix keeps its 'simple' form ("in*"
        finds "install"; English would leave "in" out); an alternative left with no positive
        term finds nothing, as the common words alone do ("the -draft" is not every record
        without "draft")."""
        each = iter(forms)
        alternatives: list[str] = []
        for terms in self.alternatives:
            kept: list[tuple[str, bool]] = []
            for term in terms:
                english, simple = next(each)
                text = english or (simple if term.prefix else "")
                if text:
                    kept.append((text, term.negated))
            if any(not negated for _, negated in kept):
                alternatives.append(_all(kept))
        return _either(alternatives)


def _all(terms: Iterable[tuple[str, bool]]) -> str:
    """Terms (their `to_tsquery` text, whether negated) as one `to_tsquery` text (AND)."""
    return " & ".join(f"!({text})" if negated else f"({text})" for text, negated in terms)


def _either(alternatives: list[str]) -> str:
    """Alternatives as one `to_tsquery` text (OR)."""
    if len(alternatives) > 1:
        return " | ".join(f"({a})" for a in alternatives)
    return "".join(alternatives)


def normalise(text: str) -> str:
    """`text` as migration 0035's `stello_search_text` made a searched text: `<` and `>`
    as spaces, the marks (MARKS) removed. Since 0038 the function makes every ASCII
    punctuation character a space; a query keeps its own (`"`, `-` and `*` are its
    syntax) and `_PIECE` splits the words at the rest, so both read the same words.
    Since 0041 both read the full-width forms as ASCII (FULL_WIDTH): full-width "API" is "API",
    and a full-width `"`, `-` or `*` is the query's syntax, as typed in ASCII. Since 0042 both
    read a Latin letter with diacritics as its base letter and remove the combining marks
    (SEARCHED, MARKS): "café", "CAFÉ" and "cafe" with U+0301 are all "cafe". Since 0043 both
    read "ẞ" as "ß" and remove the variation selectors and the combining marks for symbols;
    the symbols stay (`_PIECE` makes each run of them a term: symbols.py). Since 0045 both
    lowercase every letter past ASCII (LOWER: "ПРИВЕТ" is "привет") and read the final sigma
    as the sigma; ASCII is lowercased by the text-search configuration, in every locale. Since
    0048 both read "ё" and "Ё" as U+0435 (YO: "Ёлка" is "елка") and remove the Hebrew
    points and cantillation marks and the Arabic harakat (VOWEL_MARKS), and since 0049 the
    Arabic tatweel and the Quranic annotation marks (QURANIC_MARKS: "كـتـب" is "كتب")."""
    return _MARK.sub("", text.translate(SEARCHED).translate(_ANGLE))


def _quote(lexeme: str) -> str:
    escaped = lexeme.replace("\\", "\\\\").replace("'", "''")
    return f"'{escaped}'"


def _cjk(run: str) -> str:
    """A CJK run as its bigrams in a row (one character: a prefix of the bigrams)."""
    if len(run) == 1:
        return f"{_quote(run)}:*"
    return " <-> ".join(_quote(run[i : i + 2]) for i in range(len(run) - 1))


def _symbols(run: str) -> str:
    """A run of symbols as their lexemes in a row (migration 0043, symbols.py)."""
    return " <-> ".join(_quote(lexeme(c)) for c in run)


def _word(word: str, *, prefix: bool) -> str:
    """One word's pieces (ASCII/Latin words, CJK runs and runs of symbols), all required;
    a symbol is never a prefix."""
    pieces = _PIECE.findall(word)
    parts: list[str] = []
    for i, piece in enumerate(pieces):
        if _CJK_RUN.fullmatch(piece):
            parts.append(f"({_cjk(piece)})")
        elif SYMBOL_RUN.fullmatch(piece):
            parts.append(f"({_symbols(piece)})")
        elif prefix and i == len(pieces) - 1:
            parts.append(f"{_quote(piece)}:*")
        else:
            parts.append(_quote(piece))
    return " & ".join(parts)


def _phrase(text: str) -> str:
    """A quoted phrase: its other words as one phrase, each CJK run as its bigrams, each run
    of symbols as its lexemes (the vector holds both apart from the words)."""
    parts: list[str] = []
    words = " ".join(_PIECE.findall(SYMBOL_RUN.sub(" ", _CJK_RUN.sub(" ", text))))
    if words:
        parts.append(_quote(words))  # to_tsquery makes a quoted text a phrase
    parts.extend(f"({_cjk(run)})" for run in _CJK_RUN.findall(text))
    parts.extend(f"({_symbols(run)})" for run in SYMBOL_RUN.findall(text))
    return " & ".join(parts)


def parse_query(raw: str, name: str = "query", *, all_prefix: bool = False) -> SearchQuery:
    """The `to_tsquery` text of `raw`; with `all_prefix`, every word is a prefix.

    Raises:
        InvalidArgument: `raw` is empty, too long, holds U+0000, has more
            than MAX_QUERY_TERMS terms, or has no positive term.
    """
    if "\x00" in raw:
        raise InvalidArgument.field(name, "must not contain U+0000")
    if not raw.strip():
        raise InvalidArgument.field(name, "must not be empty")
    if len(raw) > MAX_QUERY_CHARS:
        raise InvalidArgument.field(
            name, f"must be at most {MAX_QUERY_CHARS} characters, got {len(raw)}"
        )
    groups: list[list[Term]] = [[]]
    raw = normalise(raw)
    terms = 0
    positive = False
    for match in _TOKEN.finditer(raw):
        negated = bool(match.group(1) or match.group(3))
        prefix = False
        if match.group(2) is not None:
            fragment = _phrase(match.group(2))
        else:
            word = match.group(4)
            if word.lower() == "or" and not negated:
                if groups[-1]:
                    groups.append([])
                continue
            prefix = all_prefix or word.endswith("*")
            fragment = _word(word, prefix=prefix)
        if not fragment:
            continue  # punctuation only (`""`, `-`, `*`): no term, finds nothing
        terms += 1
        if terms > MAX_QUERY_TERMS:
            raise InvalidArgument.field(name, f"must have at most {MAX_QUERY_TERMS} terms")
        positive = positive or not negated
        groups[-1].append(Term(fragment, negated, prefix))
    if terms and not positive and any(groups):
        raise InvalidArgument.field(name, "needs at least one term that is not negated (-)")
    # An alternative of negated terms alone finds nothing ("a or -b" is "a"): it would
    # match every text without them.
    alternatives = tuple(tuple(g) for g in groups if any(not t.negated for t in g))
    text = _either([_all((t.text, t.negated) for t in a) for a in alternatives])
    return SearchQuery(text, text, alternatives)

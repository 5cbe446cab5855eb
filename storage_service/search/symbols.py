"""The emoji and symbols that search reads as terms of their own (migration 0043).

PostgreSQL's text-search parser drops a symbol ("🚀", "✅", "→", "€", "★") as a blank under
C.UTF-8, and glues it to the letters beside it under the C locale ("deploy🚀" one word): a
symbol was found by no query. Migration 0043's vector functions read each character of
`SYMBOL_RANGES` apart: the words' text has a space where it was, and each one adds the lexeme
`PREFIX` and its code point in five hex digits ("🚀" is PREFIX '1f680', "★" PREFIX '02605'), a
word the parser reads as itself (letters and digits: no stemmer, no stop word) in the order of the
symbols (`stello_search_symbols`), as the CJK bigrams are added (migration 0019). A query
makes of a symbol that lexeme (query.py), and the highlighter marks the symbol a lexeme
names, where it is (highlight.py). The text itself keeps every symbol, one character for one.

`PREFIX` is the long s (U+017F) and 'ym' since migration 0045 (0043's was 'sym': "🚀" was
'sym1f680'): every searched text and every query reads the long s as "s" (letters.py), so no
typed word is a symbol's lexeme. With 'sym1f680', the word "sym1f680" typed found every "🚀",
and "🚀" the records holding that word. Every locale's parser reads the long s as a letter (a
small one) and the configurations keep it.

The ranges: the Latin-1 signs (currency ¢£¤¥, ¦ §, ©, ¬, ®, °, ±, ¶, the multiplication and
division signs), the double
exclamation and exclamation question marks (‼ ⁉), the currency symbols (€, ₹, ₿), ™, the
arrows, mathematical operators, technical symbols, control pictures, enclosed alphanumerics
(①, Ⓜ), box drawing, geometric shapes, miscellaneous symbols, dingbats, braille and the
supplemental arrows and symbols (U+2190-U+2BFF), and the emoji blocks (U+1F000-U+1FAFF: the
pictographs, emoticons, transport, flags' regional indicators, skin tones).
"""

from __future__ import annotations

import re

SYMBOL_RANGES = (
    (0x00A2, 0x00A7),
    (0x00A9, 0x00A9),
    (0x00AC, 0x00AC),
    (0x00AE, 0x00AE),
    (0x00B0, 0x00B1),
    (0x00B6, 0x00B6),
    (0x00D7, 0x00D7),
    (0x00F7, 0x00F7),
    (0x203C, 0x203C),
    (0x2049, 0x2049),
    (0x20A0, 0x20CF),
    (0x2122, 0x2122),
    (0x2190, 0x2BFF),
    (0x1F000, 0x1FAFF),
)
# The ranges as a regular expression's class (without brackets), Python's syntax.
SYMBOLS = "".join(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in SYMBOL_RANGES)
SYMBOL_RUN = re.compile(f"[{SYMBOLS}]+")
# The same class in PostgreSQL's regular expressions (\uXXXX, \UXXXXXXXX), as migration 0043
# writes it.
SQL_SYMBOLS = "".join(
    (f"\\u{a:04x}" if a < 0x10000 else f"\\U{a:08x}")
    + ("" if a == b else "-" + (f"\\u{b:04x}" if b < 0x10000 else f"\\U{b:08x}"))
    for a, b in SYMBOL_RANGES
)
# The long s that starts a symbol's lexeme: read as "s" in every text, so in no typed word.
PREFIX = "\u017fym"
_LEXEME = re.compile(PREFIX + r"([0-9a-f]{5})")
_SYMBOL = re.compile(f"[{SYMBOLS}]")


def lexeme(symbol: str) -> str:
    """The lexeme of one symbol: `PREFIX` and its code point in five hex digits."""
    return f"{PREFIX}{ord(symbol):05x}"


def lexemes(text: str) -> str:
    """The lexemes of `text`'s symbols in their order, spaced (`stello_search_symbols`)."""
    return " ".join(lexeme(c) for c in _SYMBOL.findall(text))


def symbol_of(word: str) -> str | None:
    """The symbol a lexeme names, or None when `word` is no symbol's lexeme."""
    m = _LEXEME.fullmatch(word)
    if m is None:
        return None
    symbol = chr(int(m.group(1), 16))
    return symbol if _SYMBOL.fullmatch(symbol) else None

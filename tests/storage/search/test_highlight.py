"""A hit's snippet costs what the text up to its first match costs, not the record's size
(explore11 F2), and marks the same ranges as the whole-text highlight it replaced."""

from __future__ import annotations

import random
import re

import pytest

from storage_service.search import highlight
from storage_service.search.highlight import snippet
from storage_service.search.query import CJK, COMBINING, MARKS, SEARCHED
from storage_service.search.stop_words import ENGLISH

# The highlight before explore11 F2, the oracle: the whole content lowercased, every word read
# (a word ends at `_`, which the records read as a space; it takes the combining marks).
_WORD = re.compile(rf"(?:(?![_{CJK}])\w)(?:(?![_{CJK}])\w|[{MARKS}{COMBINING}])*")
_MARK = re.compile(f"[{MARKS}]+")
_HAS_CJK = re.compile(rf"[{CJK}]")


def _old_ranges(content: str, terms: tuple[str, ...]) -> list[tuple[int, int]]:
    lowered = content.translate(SEARCHED).lower()  # full-width forms (0041), letters (0042)
    spans: list[tuple[int, int]] = []
    words = [t for t in terms if not _HAS_CJK.search(t)]
    if words:
        for m in _WORD.finditer(lowered):
            word = _MARK.sub("", m.group())
            if word.startswith(tuple(words)) and word not in ENGLISH:  # common words: none
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


def old_snippet(content: str, terms: tuple[str, ...]) -> tuple[str, int, list[tuple[int, int]]]:
    spans = _old_ranges(content, terms)
    start = max(0, spans[0][0] - 60) if spans else 0
    if spans and len(content) - start < 240:
        start = max(0, len(content) - 240)
    end = start + 240
    inside = [
        (max(s, start) - start, min(e, end) - start) for s, e in spans if s < end and e > start
    ]
    return content[start:end], start, inside


WORDS = "the quick brown fox jumps over lazy dogs password kettle 水壶 很好 한국어 ΟΔΟΣ".split()
FILLER = " ".join(random.Random(7).choice(WORDS[:7]) for _ in range(20_000))
CORPUS = [
    ("", ("fox",)),
    ("no match here at all", ("zebra",)),
    ("Hello WORLD, hello world", ("world",)),
    ("the pass\u200bword is long, pass\u00adwords too", ("password",)),
    ("see <thinking>plan carefully</thinking> then answer", ("think", "plan")),
    ("zero\ufeffwidth and join\u2060ed", ("zerowidth", "joined")),
    ("我的水壶很好，水壶水壶", ("水壶", "很好")),
    ("水", ("水",)),
    ("한국어 텍스트 한국", ("한국",)),
    ("ΟΔΟΣ οδος ΟΔΟΣ.", ("οδοσ", "οδος")),
    ("İstanbul and istanbul and Istanbul", ("istanbul", "i")),
    ("Straße STRASSE strasse", ("stra",)),
    ("running runs runner", ("run",)),
    ("quick brown", ()),
    ("kettle " * 100, ("kettle",)),
    ("fox " + FILLER, ("fox",)),
    (FILLER + " zebra " + FILLER, ("zebra",)),
    (FILLER + " zebra", ("zebra", "kettle")),
    (FILLER + " 水壶", ("水壶",)),
    ("x" * 300_000 + " zebra", ("zebra",)),
    ("水" * 50_000 + "水壶" + "水" * 50_000, ("水壶",)),
    ("İ" * 500 + " zebra " + "İ" * 500, ("zebra",)),
    ("\u3000aßsİ", ("\u0307",)),  # a zero-width candidate at the end
    ("the \uff21\uff30\uff29 and api\uff0d\uff4b\uff45\uff59", ("api", "key")),  # full width
    ("Le CAFÉ, le café et cafe\u0301s à Łódź", ("cafe", "lodz", "a")),  # diacritics (0042)
    ("Ёлка, ЁЛКА и зелёная елка", ("елк", "зелен")),  # "ё" (0048)
    ("كَتَبَ الدَّرْسَ و كتب", ("كتب", "الدرس")),  # the harakat (0048)
    ("שָׁלוֹם־עוֹלָם שלום", ("שלום", "עולם")),  # niqqud, the maqaf (0048)
    ("كـتـب ـكتب فِيهِۦ محمدؐ ۞ هدى", ("كتب", "فيه", "محمد", "هد")),  # tatweel, Quranic (0049)
]


@pytest.mark.parametrize(("content", "terms"), CORPUS, ids=range(len(CORPUS)))
def test_the_snippet_is_the_whole_text_highlights(content: str, terms: tuple[str, ...]) -> None:
    assert snippet(content, terms) == old_snippet(content, terms)


def test_random_texts_have_the_same_snippets() -> None:
    """Texts of words, marks, tags, CJK, full-width forms, letters with diacritics, "ё", the
    Arabic and Hebrew vowel marks, the tatweel and Quranic marks and the characters whose
    lowercase is special (`İ` is two code points, `Σ` depends on what follows, U+017F and
    U+212A fold to ASCII in a regex)."""
    alphabet = [*"abcsiσςΣİIıſKkK", " ", " ", "\n", "\u3000", "\u200b", "\u00ad", "\u2060"]
    alphabet += [*"'.<>_1éÉßẞ", "\u0307", "水", "壶", "ー", "ア", "한"]
    alphabet += ["\uff21", "\uff41", "\uff33", "\uff11", "\uff0d", "\uff3f"]  # full width
    alphabet += [*"àÀçŁłøİšẞǾ", "\u0301", "\u0308"]  # letters with diacritics, marks (0042)
    alphabet += [*"ёЁеЕлк", *"كتب", "\u064e", "\u0651", "\u0670", *"שלו", "\u05b8", "\u05c1"]
    alphabet += ["\u05be", "\u0591"]  # "ё", the harakat, niqqud and cantillation (0048)
    alphabet += ["\u0640", "\u0610", "\u06e5", "\u06dd", "\u06de"]  # tatweel, Quranic (0049)
    rng = random.Random(11)
    for _ in range(1500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.choice([5, 40, 300, 1500])))
        lowered = text.translate(SEARCHED).lower()
        terms: list[str] = []
        for _ in range(rng.randint(1, 4)):
            at = rng.randint(0, max(0, len(lowered) - 3))
            terms.append(lowered[at : at + rng.randint(1, 3)])
            if rng.random() < 0.3:
                terms[-1] = rng.choice(
                    [
                        "a",
                        "s",
                        "σ",
                        "ς",
                        "i",
                        "i\u0307",
                        "\u0307",
                        "水壶",
                        "壶",
                        "ア",
                        "ss",
                        "ел",
                        "كت",
                    ]
                )
        query = tuple(dict.fromkeys(terms))
        assert snippet(text, query) == old_snippet(text, query), (text, query)


def _read(content: str, terms: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> int:
    """The characters the highlight of one hit lowercases (the words it reads)."""
    read = 0

    def counted(text: str) -> str:
        nonlocal read
        read += len(text)
        return text.translate(SEARCHED).lower()

    with monkeypatch.context() as patch:
        patch.setattr(highlight, "_lower", counted)
        snippet(content, terms)
    return read


def test_the_work_of_a_hit_does_not_follow_the_record_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first match near the start of 10 KB and of 1 MiB: the same characters read (the
    whole-text highlight lowercased and read every word of both: explore11 F2, a page of
    100 such hits held the event loop for seconds)."""
    head = "Some words first, then the kettle boiled over. "
    small = head + FILLER[:10_000]
    big = head + (FILLER * 10)[: 1 << 20]
    terms = ("kettl", "boil", "水壶")
    assert snippet(big, terms) == old_snippet(big, terms)
    read_small, read_big = _read(small, terms, monkeypatch), _read(big, terms, monkeypatch)
    assert read_big == read_small and read_big <= 4_096, (read_small, read_big)

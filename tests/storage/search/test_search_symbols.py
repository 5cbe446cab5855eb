"""Emoji and symbols are searched (migration 0043): "🚀", "✅", "→", "€" or "★" alone, or with
words ("deploy 🚀"), find the records, labels and metadata values that hold them, and a hit is
marked on the symbol itself, at its offset in the original text. They found nothing: the
text-search parser drops them (or, under the C locale, glues them to the word beside them).
The capital sharp s "ẞ" reads as the small "ß", as its lowercase does."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from stello.storage.v1 import storage_pb2_grpc
from storage_service.search.query import normalise, parse_query
from storage_service.search.symbols import SYMBOL_RANGES, lexemes
from tests.storage.helpers import rec
from tests.storage.records.test_lineage import append
from tests.storage.search.test_search import found, marked, search, session_ids, tag
from tests.storage.search.test_search_tags import labels
from tests.support.fixtures import MakeSession, TestSpace

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub

CONTENTS = (
    "deploy 🚀 done",  # 1
    "tests ✅ passed, 3 ✅ in a row",  # 2
    "input → output",  # 3
    "costs 12€ a month",  # 4: glued to the number
    "rated ★★★ by users",  # 5
    "deploy🚀now",  # 6: glued to the words
    "we deploy tomorrow",  # 7: the word, no symbol
    "love it ❤️ and 👍🏽",  # 8: a variation selector, a skin tone
    "STRAẞE",  # 9: the capital sharp s
    "Straße und ß",  # 10
)


@pytest.fixture(name="symbols")
async def _symbols(stub: Stub, space: TestSpace, make_session: MakeSession) -> uuid.UUID:
    sid = await make_session(label="Symbols")
    await append(stub, space, sid, *(rec(content) for content in CONTENTS))
    return sid


class TestRecords:
    @pytest.mark.parametrize(
        ("query", "seqs"),
        [
            pytest.param("🚀", {1, 6}, id="emoji"),
            pytest.param("✅", {2}, id="check-mark"),
            pytest.param("→", {3}, id="arrow"),
            pytest.param("€", {4}, id="currency"),
            pytest.param("★", {5}, id="star"),
            pytest.param("deploy 🚀", {1, 6}, id="word-and-emoji"),
            pytest.param("deploy🚀", {1, 6}, id="glued-query"),
            pytest.param("deploy -🚀", {7}, id="negated-emoji"),
            pytest.param('"deploy 🚀"', {1, 6}, id="phrase"),
            pytest.param("★★", {5}, id="run-of-symbols"),
            pytest.param("❤", {8}, id="without-the-variation-selector"),
            pytest.param("❤️", {8}, id="with-the-variation-selector"),
            pytest.param("👍", {8}, id="skin-tone-apart"),
            pytest.param("straße", {9, 10}, id="small-sharp-s-finds-capital"),
            pytest.param("STRAẞE", {9, 10}, id="capital-sharp-s-finds-small"),
            pytest.param("ẞ", {10}, id="capital-sharp-s-alone"),
        ],
    )
    async def test_found(
        self, stub: Stub, space: TestSpace, symbols: uuid.UUID, query: str, seqs: set[int]
    ) -> None:
        """A symbol is found where it is, alone, beside a word or glued to one."""
        assert found(await search(stub, space, query)) == {(str(symbols), s) for s in seqs}

    @pytest.mark.parametrize(
        ("query", "seq", "words"),
        [
            pytest.param("🚀", 1, ["🚀"], id="emoji"),
            pytest.param("deploy 🚀", 1, ["deploy", "🚀"], id="word-and-emoji"),
            pytest.param("deploy 🚀", 6, ["deploy🚀"], id="glued-one-span"),
            pytest.param("✅", 2, ["✅", "✅"], id="twice"),
            pytest.param("€", 4, ["€"], id="after-a-number"),
            pytest.param("👍", 8, ["👍"], id="after-astral-characters"),
            pytest.param("straße", 9, ["STRAẞE"], id="capital-sharp-s"),
        ],
    )
    async def test_the_symbols_are_marked(
        self,
        stub: Stub,
        space: TestSpace,
        symbols: uuid.UUID,
        query: str,
        seq: int,
        words: list[str],
    ) -> None:
        """The highlight marks the symbol itself, at its offset (code points) in the
        original text."""
        hits = {hit.seq: hit for hit in await search(stub, space, query)}
        assert marked(hits[seq]) == words


class TestLabelsAndValues:
    @pytest.mark.parametrize(
        ("label", "query"),
        [
            pytest.param("Launch 🚀", "🚀", id="emoji"),
            pytest.param("Price in €", "€", id="currency"),
            pytest.param("Launch🚀", "launch 🚀", id="glued"),
        ],
    )
    async def test_a_label_is_found_by_its_symbol(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, label: str, query: str
    ) -> None:
        """SearchSessions reads a label's symbols as the query's."""
        sid = await make_session(label=label)
        await make_session(label="Launch plan")
        assert await labels(stub, space, query) == [str(sid)]

    async def test_a_metadata_value_is_found_by_its_symbol(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """A metadata value's symbols are searched (its vector reads the labels')."""
        starred, plain = await make_session(), await make_session()
        await tag(pool, space.id, starred, rating="★★★")
        await tag(pool, space.id, plain, rating="three")
        assert await session_ids(stub, space, "★") == [str(starred)]


class TestTheTermsAreNoWords:
    """A symbol's term is one no typed text reads as (migration 0045: the long s U+017F and
    'ym1f680', the long s read as "s" in every text and query): the word "sym1f680" typed
    found every "🚀", and "🚀" the records holding the word "sym1f680"."""

    async def test_a_record_is_found_by_the_word_or_the_symbol_it_holds(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """The word "sym1f680" finds the records holding that word (with a long s too), not
        those holding "🚀"; "🚀" finds the rocket, not the word."""
        sid = await make_session()
        contents = ("deploy 🚀 done", "the word sym1f680 itself", "\u017fym1f680 with a long s")
        await append(stub, space, sid, *(rec(c) for c in contents))
        for word in ("sym1f680", "SYM1F680", "\u017fym1f680", '"word sym1f680"', "sym1f*"):
            expected = {2} if word.startswith('"') else {2, 3}
            assert found(await search(stub, space, word)) == {(str(sid), s) for s in expected}
        assert found(await search(stub, space, "🚀")) == {(str(sid), 1)}
        hits = await search(stub, space, "sym1f680")
        assert [marked(hit) for hit in hits if hit.seq == 2] == [["sym1f680"]]

    async def test_a_label_or_value_is_found_by_the_word_or_the_symbol(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """Labels and metadata values: the typed word finds the word, the symbol the symbol."""
        rocket, word = await make_session(label="Launch 🚀"), await make_session(label="sym1f680")
        starred, spelled = await make_session(), await make_session()
        await tag(pool, space.id, starred, rating="★")
        await tag(pool, space.id, spelled, rating="sym02605")
        assert await labels(stub, space, "sym1f680") == [str(word)]
        assert await labels(stub, space, "🚀") == [str(rocket)]
        assert await session_ids(stub, space, "sym02605") == [str(spelled)]
        assert await session_ids(stub, space, "★") == [str(starred)]


def _symbol_chars() -> str:
    """Every character of the symbol ranges."""
    return "".join(chr(p) for a, b in SYMBOL_RANGES for p in range(a, b + 1))


def _neighbours() -> str:
    """The characters just outside each range (no symbols)."""
    return "".join(chr(p) for a, b in SYMBOL_RANGES for p in (a - 1, b + 1))


async def test_the_database_reads_symbols_as_the_query_does(pool: asyncpg.Pool) -> None:
    """`stello_search_text` and `normalise` leave every symbol as it is and remove the
    variation selectors and the combining marks for symbols; `stello_search_symbols` makes
    of each symbol the lexeme `lexemes` makes, and of the characters beside the ranges none;
    each symbol's record vector matches the query of that symbol alone, and the text around
    it reads as its own word."""
    chars = _symbol_chars()
    text = "".join(f"a{c}\ufe0fb\u20e3 " for c in chars + _neighbours()) + "\u1e9e\u00df"
    assert await pool.fetchval("SELECT stello_search_text($1)", text) == normalise(text)
    assert await pool.fetchval("SELECT stello_search_symbols($1)", text) == lexemes(text)
    queries = [parse_query(c).text for c in chars]
    missed = await pool.fetch(
        "SELECT c FROM unnest($1::text[], $2::text[]) AS q(c, query)"
        " WHERE NOT stello_search_vector('x' || c || 'y')"
        " @@ to_tsquery('english', 'x & ' || query || ' & y')",
        list(chars),
        queries,
    )
    assert [row["c"] for row in missed] == []


def test_the_query_reads_symbols() -> None:
    """A symbol is a term of its own, next to the words glued to it; a run of symbols is a
    phrase of its lexemes."""
    assert parse_query("deploy🚀").text == "('deploy' & ('\u017fym1f680'))"
    assert parse_query("🚀*", all_prefix=True).text == "(('\u017fym1f680'))"  # never a prefix
    assert parse_query("★★").text == "(('\u017fym02605' <-> '\u017fym02605'))"
    assert parse_query('"deploy 🚀 now"').text == "('deploy now' & ('\u017fym1f680'))"
    assert parse_query("sym1f680").text == "('sym1f680')"  # a word, not the rocket
    assert parse_query("❤\ufe0f").text == parse_query("❤").text
    assert normalise("\u1e9e") == "\u00df"

"""SearchRecords and SearchSessions (issue #37, migrations 0019, 0021) on a real storage server:
English, CJK and mixed text, phrases, prefixes, stop words, hostile queries, paging,
inherited records found once, hidden sessions and other tenants never found."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, TypeVar

import asyncpg
import grpc
import pytest

from stello.common.v1 import common_pb2
from stello.errors import error_info, error_info_reason, field_violations
from stello.reasons import SEARCH_TOO_BROAD, SESSION_NOT_FOUND
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from storage_service import create_app
from storage_service.config import StorageSettings
from storage_service.search.repository import (
    NEWEST_PROBE_ROWS,
    RELEVANCE_CANDIDATES,
    SEARCH_RECORDS,
    SEARCH_SESSIONS,
    SearchRepository,
)
from storage_service.search.stop_words import ENGLISH
from tests.storage.helpers import ASSISTANT, rec, rpc_error
from tests.storage.records.test_lineage import append, inherit
from tests.support.fixtures import MakeSession, ServerStarter, TestSpace
from tests.support.history import READS, end_other_backends

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub
RELEVANCE = common_pb2.SEARCH_ORDER_RELEVANCE


async def search(stub: Stub, space: TestSpace, query: str, **fields: Any) -> list[Any]:
    reply = await stub.SearchRecords(
        storage_pb2.SearchRecordsRequest(space_id=space.sid, query=query, **fields)
    )
    return list(reply.hits)


def found(hits: list[Any]) -> set[tuple[str, int]]:
    return {(h.session_id, h.seq) for h in hits}


def marked(hit: Any) -> list[str]:
    return [hit.snippet[m.start : m.end] for m in hit.matches]


@pytest.fixture(name="corpus")
async def _corpus(stub: Stub, space: TestSpace, make_session: MakeSession) -> uuid.UUID:
    sid = await make_session(label="Corpus")
    await append(
        stub,
        space,
        sid,
        rec("The quick brown fox jumps over the lazy dog"),
        rec("Connection refused while running the migration", ASSISTANT),
        rec("我们今天讨论数据库的索引设计"),
        rec("部署到 Kubernetes 集群 failed with OOMKilled"),
        rec("brown bread and lazy afternoons"),
    )
    return sid


class TestMatching:
    async def test_english_words_match_their_stems(
        self, stub: Stub, space: TestSpace, corpus: uuid.UUID
    ) -> None:
        hits = await search(stub, space, "run migrations")
        assert found(hits) == {(str(corpus), 2)}
        assert marked(hits[0]) == ["running", "migration"]
        assert hits[0].label == "Corpus" and hits[0].role == ASSISTANT

    @pytest.mark.parametrize(
        ("query", "words"),
        [
            pytest.param("using", ["using"], id="e-dropped-before-ing"),
            pytest.param("make", ["making"], id="the-stem-of-making"),
            pytest.param("policy", ["policy", "policies"], id="y-made-i"),
            pytest.param("cities", ["city"], id="plural-finds-y"),
            pytest.param("history company", ["company", "history"], id="two-y-words"),
        ],
    )
    async def test_the_word_found_by_its_stem_is_marked(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, query: str, words: list[str]
    ) -> None:
        """A word whose stem is no prefix of it (the stemmer made `y` an `i` or dropped a
        final `e`: "policy" is 'polici', "using" 'use') is marked where it matched."""
        sid = await make_session()
        text = "using the company policy and policies for making history in the city"
        await append(stub, space, sid, rec(text))
        hits = await search(stub, space, query)
        assert found(hits) == {(str(sid), 1)}
        assert marked(hits[0]) == words

    async def test_chinese_text_is_found_by_any_run_of_characters(
        self, stub: Stub, space: TestSpace, corpus: uuid.UUID
    ) -> None:
        hits = await search(stub, space, "数据库")
        assert found(hits) == {(str(corpus), 3)}
        assert marked(hits[0]) == ["数据库"]
        assert found(await search(stub, space, "索引设计")) == {(str(corpus), 3)}
        assert found(await search(stub, space, "库")) == {(str(corpus), 3)}
        assert await search(stub, space, "设计索引") == []

    async def test_mixed_text(self, stub: Stub, space: TestSpace, corpus: uuid.UUID) -> None:
        hits = await search(stub, space, "集群 oomkilled")
        assert found(hits) == {(str(corpus), 4)}
        assert marked(hits[0]) == ["集群", "OOMKilled"]

    async def test_a_phrase_needs_its_words_adjacent(
        self, stub: Stub, space: TestSpace, corpus: uuid.UUID
    ) -> None:
        assert found(await search(stub, space, "brown lazy")) == {
            (str(corpus), 1),
            (str(corpus), 5),
        }
        assert found(await search(stub, space, '"lazy dog"')) == {(str(corpus), 1)}
        assert found(await search(stub, space, "brown -fox")) == {(str(corpus), 5)}
        assert found(await search(stub, space, "fox or bread")) == {
            (str(corpus), 1),
            (str(corpus), 5),
        }

    async def test_a_prefix(self, stub: Stub, space: TestSpace, corpus: uuid.UUID) -> None:
        assert found(await search(stub, space, "kube*")) == {(str(corpus), 4)}
        assert await search(stub, space, "kube") == []
        assert found(await search(stub, space, "conn*")) == {(str(corpus), 2)}

    @pytest.mark.parametrize("query", ["the", "the of a", "...", "!!! ?? --", '""'])
    async def test_stop_words_or_punctuation_find_nothing(
        self, stub: Stub, space: TestSpace, corpus: uuid.UUID, query: str
    ) -> None:
        assert await search(stub, space, query) == []

    @pytest.mark.parametrize(
        ("query", "words"),
        [
            ("in*", ["install", "index"]),
            ("be*", ["benchmark"]),
            ("the* -install", ["theory"]),
            ('"the*"', []),
        ],
    )
    async def test_a_prefix_that_is_a_common_word_still_finds_its_words(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, query: str, words: list[str]
    ) -> None:
        """A prefix is not a word: "in*" finds "install" and "index", though "in" alone is a
        common word left out (it found nothing, as "in" does); in a phrase it is a word."""
        sid = await make_session()
        await append(stub, space, sid, rec("install the index"), rec("benchmark theory"), rec("x"))
        hits = await search(stub, space, query)
        assert [w for h in reversed(hits) for w in marked(h)] == words

    @pytest.mark.parametrize(
        ("query", "words"),
        [
            ("the*", ["theory"]),
            ("in*", ["index"]),
            ("the* in*", ["theory", "index"]),
            ("wills", ["wills"]),
        ],
    )
    async def test_a_prefix_marks_no_common_word(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, query: str, words: list[str]
    ) -> None:
        """A common word is in no record's vector, so no query finds it, and a hit marks none:
        "the*" marks "theory", not "the", "them" nor "there"; "wills" (the stem 'will') marks
        "wills", not "will"."""
        sid = await make_session()
        await append(
            stub, space, sid, rec("The theory of them: there, in the index, it will wills")
        )
        (hit,) = await search(stub, space, query)
        assert marked(hit) == words

    @pytest.mark.parametrize(
        ("query", "words"),
        [
            ("the*", ["theory"]),
            ("thing", ["thing"]),
            ("using*", ["using", "useful"]),
            ("policy", ["policy"]),
        ],
    )
    async def test_a_stem_marks_the_words_it_was_made_from_only(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, query: str, words: list[str]
    ) -> None:
        """The English stemmer drops "ing" (and writes "e") only after a vowel, and writes "i"
        for a final "y" only after one: 'the':* came from no word in "ing", so "thing" (whose
        stem is 'thing') is not marked, where the highlighter marked it for "the*"; 'use'
        still marks "using"."""
        sid = await make_session()
        await append(
            stub, space, sid, rec("The thing about theory: using a policy is useful, they say")
        )
        (hit,) = await search(stub, space, query)
        assert marked(hit) == words

    async def test_the_common_words_are_the_servers(self, pool: asyncpg.Pool) -> None:
        """The highlighter's common words (stop_words.ENGLISH) are those of the server's
        'english' configuration: each is left out of a vector, and the server's file lists
        them all."""
        listed = await pool.fetchval(
            "SELECT pg_read_file(setting || '/tsearch_data/english.stop')"
            " FROM pg_config WHERE name = 'SHAREDIR'"
        )
        assert set(listed.split()) == ENGLISH
        kept = await pool.fetchval(
            "SELECT array_agg(w) FROM unnest($1::text[]) AS w"
            " WHERE to_tsvector('english', w) <> ''::tsvector",
            sorted(ENGLISH),
        )
        assert kept is None

    @pytest.mark.parametrize(
        ("query", "seqs"),
        [
            ("the -fox", set()),
            ('"of the" -bread', set()),
            ("bread or the -fox", {5}),
            ("bread or -fox", {5}),
        ],
    )
    async def test_ignored_words_with_negations_find_nothing(
        self, stub: Stub, space: TestSpace, corpus: uuid.UUID, query: str, seqs: set[int]
    ) -> None:
        """An alternative whose positive words are all ignored ("the") finds nothing, as those
        words alone do: not every record lacking its negated word (it found 4 of 5)."""
        assert found(await search(stub, space, query)) == {(str(corpus), n) for n in seqs}

    @pytest.mark.parametrize(
        ("text", "query"),
        [
            pytest.param("हिन्दी भाषा सीखें", "हिन्दी", id="devanagari"),
            pytest.param("தமிழ் மொழி", "தமிழ்", id="tamil"),
            pytest.param("สวัสดี ครับ", "สวัสดี", id="thai"),
            pytest.param("ကျေးဇူး ပါ", "ကျေးဇူး", id="burmese"),
        ],
    )
    async def test_words_with_combining_marks_are_found_and_marked(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, text: str, query: str
    ) -> None:
        """A word whose letters carry combining marks (vowel signs, viramas, tone marks) is one
        word in the query as in the records: it was cut at each mark and found nothing."""
        sid = await make_session(label=text)
        await append(stub, space, sid, rec(text))
        hits = await search(stub, space, query)
        assert found(hits) == {(str(sid), 1)}
        assert marked(hits[0]) == [query]
        reply = await stub.SearchSessions(
            storage_pb2.SearchSessionsRequest(space_id=space.sid, query=query[:3])
        )
        assert [m.id for m in reply.sessions] == [str(sid)]

    async def test_an_alternative_of_negations_alone_finds_no_session(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """SearchSessions reads `or` as SearchRecords does: "alpha or -beta" finds what
        "alpha" finds, not every session whose label lacks "beta"."""
        alpha = await make_session(label="alpha")
        await make_session(label="gamma")
        reply = await stub.SearchSessions(
            storage_pb2.SearchSessionsRequest(space_id=space.sid, query="alpha or -beta")
        )
        assert [m.id for m in reply.sessions] == [str(alpha)]

    async def test_relevance_order(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        sid = await make_session()
        await append(stub, space, sid, rec("apple apple apple pie"), rec("apple"), rec("pear"))
        hits = await search(stub, space, "apple", order=RELEVANCE)
        assert [h.seq for h in hits] == [1, 2]
        assert hits[0].rank > hits[1].rank > 0


class TestHostile:
    @pytest.mark.parametrize(
        "query",
        [
            "'",
            "''",
            "\\",
            "\\'",
            "a'b\\c",
            "a & b | !c",
            "(a",
            "a:*",
            "a <-> b",
            "*",
            "-",
            '"unterminated',
            "or",
            "or or",
            "foo:AB",
            "x" * 1000,
            " ".join(["w"] * 64),
            '"' * 999,
            '"" ' * 300 + "fox",
            " ".join(["w"] * 64) + ' "" - *',
        ],
    )
    async def test_any_text_is_a_result(
        self, stub: Stub, space: TestSpace, corpus: uuid.UUID, query: str
    ) -> None:
        await search(stub, space, query)

    @pytest.mark.parametrize(
        "query",
        [
            "",
            "   ",
            "x" * 1001,
            " ".join(["w"] * 65),
            " ".join(["w"] * 10_000)[:1000] + "!",
            "-fox",
            '-"lazy dog"',
        ],
    )
    async def test_bad_queries_are_invalid_argument_naming_query(
        self, stub: Stub, space: TestSpace, query: str
    ) -> None:
        error = await rpc_error(search(stub, space, query))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
        assert [f.field for f in field_violations(error)] == ["query"]

    async def test_ten_thousand_terms(self, stub: Stub, space: TestSpace) -> None:
        error = await rpc_error(search(stub, space, " ".join(["w"] * 10_000)))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT

    async def test_nul(self, stub: Stub, space: TestSpace) -> None:
        error = await rpc_error(search(stub, space, "a\x00b"))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT

    async def test_bad_fields(self, stub: Stub, space: TestSpace) -> None:
        sid = str(uuid.uuid4())
        cases: list[tuple[dict[str, Any], str]] = [
            ({"session_id": sid, "root_id": sid}, "root_id"),
            ({"session_id": "nope"}, "session_id"),
            ({"page_size": 101}, "page_size"),
            ({"order": 7}, "order"),
            ({"page_token": "garbage"}, "page_token"),
        ]
        for fields, name in cases:
            error = await rpc_error(search(stub, space, "fox", **fields))
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, fields
            assert name in [f.field for f in field_violations(error)], fields
        for scope in ("session_id", "root_id"):
            error = await rpc_error(search(stub, space, "fox", **{scope: sid}))
            assert error.code() == grpc.StatusCode.NOT_FOUND
            info = error_info(error)  # as every NOT_FOUND of a session (agent.proto)
            assert info is not None and info.reason == SESSION_NOT_FOUND, scope
            assert dict(info.metadata) == {"session_id": sid}, scope
            assert error.details() == f"{scope}: session {sid} not found"  # the field it was


def _decoded(token: str) -> dict[str, Any]:
    decoded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    return decoded


def _encoded(payload: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


class TestEditedPageTokens:
    """A page token edited to carry a value its column cannot hold is INVALID_ARGUMENT
    naming page_token, never INTERNAL (explore2 finding 1)."""

    @pytest.mark.parametrize(
        ("order", "edit"),
        [
            pytest.param(common_pb2.SEARCH_ORDER_NEWEST, {"n": 2**70}, id="newest-seq-int64"),
            pytest.param(common_pb2.SEARCH_ORDER_NEWEST, {"n": -(2**63) - 1}, id="seq-below"),
            pytest.param(common_pb2.SEARCH_ORDER_NEWEST, {"n": True}, id="seq-bool"),
            pytest.param(RELEVANCE, {"n": 2**70}, id="relevance-seq-int64"),
            pytest.param(RELEVANCE, {"r": 1e308}, id="relevance-rank-float32"),
            pytest.param(common_pb2.SEARCH_ORDER_NEWEST, {"r": 1e308}, id="newest-rank"),
            pytest.param(RELEVANCE, {"r": 2**200}, id="rank-big-int"),
            pytest.param(RELEVANCE, {"r": float("inf")}, id="rank-infinite"),
            pytest.param(RELEVANCE, {"r": float("nan")}, id="rank-nan"),
            pytest.param(
                RELEVANCE, {"at": "9999-12-31T23:59:59.999999-14:00"}, id="created-after-9999"
            ),
            pytest.param(
                common_pb2.SEARCH_ORDER_NEWEST,
                {"at": "0001-01-01T00:00:00+14:00"},
                id="created-before-1",
            ),
            pytest.param(
                common_pb2.SEARCH_ORDER_NEWEST, {"at": "2020-01-01T00:00:00"}, id="created-naive"
            ),
            pytest.param(RELEVANCE, {"h": "not a time"}, id="horizon-not-a-time"),
            pytest.param(RELEVANCE, {"h": 12}, id="horizon-a-number"),
            pytest.param(
                RELEVANCE, {"h": "9999-12-31T23:59:59.999999-14:00"}, id="horizon-after-9999"
            ),
            pytest.param(RELEVANCE, {"h": "2020-01-01T00:00:00"}, id="horizon-naive"),
        ],
    )
    async def test_search_records(
        self,
        stub: Stub,
        space: TestSpace,
        make_session: MakeSession,
        order: int,
        edit: dict[str, Any],
    ) -> None:
        """SearchRecords refuses a seq, rank or time no column holds, in either order (and a
        RELEVANCE walk's horizon, the time of its first page)."""
        sid = await make_session()
        await append(stub, space, sid, *[rec(f"needle {i}") for i in range(3)])
        fields: dict[str, Any] = {"page_size": 1, "order": order}
        token = (
            await stub.SearchRecords(
                storage_pb2.SearchRecordsRequest(space_id=space.sid, query="needle", **fields)
            )
        ).next_page_token
        assert await search(stub, space, "needle", page_token=token, **fields)
        edited = _encoded({**_decoded(token), **edit})
        error = await rpc_error(search(stub, space, "needle", page_token=edited, **fields))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
        assert [f.field for f in field_violations(error)] == ["page_token"]

    @pytest.mark.parametrize(
        "at",
        [
            pytest.param("9999-12-31T23:59:59.999999-14:00", id="after-9999"),
            pytest.param("0001-01-01T00:00:00+14:00", id="before-1"),
            pytest.param("2020-01-01T00:00:00", id="naive"),
        ],
    )
    async def test_search_sessions(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, at: str
    ) -> None:
        """SearchSessions refuses a creation time timestamptz does not hold."""
        for _ in range(3):
            await make_session(label="Sibling")
        token = (
            await stub.SearchSessions(
                storage_pb2.SearchSessionsRequest(space_id=space.sid, query="sib", page_size=2)
            )
        ).next_page_token
        assert await session_ids(stub, space, "sib", page_size=2, page_token=token)
        edited = _encoded({**_decoded(token), "at": at})
        error = await rpc_error(session_ids(stub, space, "sib", page_size=2, page_token=edited))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
        assert [f.field for f in field_violations(error)] == ["page_token"]

    async def test_a_token_of_another_search_says_what_to_do(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A page token sent with another query (or scope, order, status) names page_token
        and says to send it with the same request or leave it out: it said "with these
        fields", naming none and no way on."""
        sid = await make_session(label="Needle one")
        await make_session(label="Needle two")
        await append(stub, space, sid, *[rec(f"needle {i}") for i in range(3)])
        token = (
            await stub.SearchRecords(
                storage_pb2.SearchRecordsRequest(space_id=space.sid, query="needle", page_size=1)
            )
        ).next_page_token
        error = await rpc_error(search(stub, space, "needles", page_size=1, page_token=token))
        assert error.details() == (
            "page_token: was not issued by SearchRecords for this space with this query, "
            "scope and order: pass next_page_token with the same request, or leave it empty "
            "to start again"
        )
        token = (
            await stub.SearchSessions(
                storage_pb2.SearchSessionsRequest(space_id=space.sid, query="needle", page_size=1)
            )
        ).next_page_token
        error = await rpc_error(session_ids(stub, space, "need", page_size=1, page_token=token))
        assert error.details() == (
            "page_token: was not issued by SearchSessions for this space with this query "
            "and status: pass next_page_token with the same request, or leave it empty to "
            "start again"
        )


class TestScope:
    async def test_paging_walks_every_hit_once(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        a, b = await make_session(), await make_session()
        await append(stub, space, a, *[rec(f"needle {i}") for i in range(7)])
        await append(stub, space, b, *[rec(f"needle {i}") for i in range(6)], rec("hay"))
        for order in (common_pb2.SEARCH_ORDER_NEWEST, RELEVANCE):
            seen: list[tuple[str, int]] = []
            token = ""
            while True:
                reply = await stub.SearchRecords(
                    storage_pb2.SearchRecordsRequest(
                        space_id=space.sid,
                        query="needle",
                        page_size=4,
                        page_token=token,
                        order=order,
                    )
                )
                seen += [(h.session_id, h.seq) for h in reply.hits]
                token = reply.next_page_token
                if not token:
                    break
            assert len(seen) == len(set(seen)) == 13, order

    async def test_an_inherited_record_is_found_once(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        source = await make_session()
        await append(stub, space, source, rec("shared secret"), rec("later secret"))
        child = await make_session(parent=source, source=source)
        await inherit(stub, space, child, source, until=1)
        await append(stub, space, child, rec("own secret"))
        hits = await search(stub, space, "secret")
        assert sorted((h.session_id, h.seq, h.reader_count) for h in hits) == sorted(
            [(str(source), 1, 2), (str(source), 2, 1), (str(child), 2, 1)]
        )
        in_child = await search(stub, space, "secret", session_id=str(child))
        assert found(in_child) == {(str(source), 1), (str(child), 2)}
        in_tree = await search(stub, space, "secret", root_id=str(source))
        assert len(in_tree) == 3

    async def test_a_fork_holding_a_deleted_source_s_records_is_not_its_own_reader(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """Once a source is erased, its records' holder counts once: a fork reading alone is
        read by 1 session, a second fork reading them too makes 2 (explore2 finding 2)."""
        source = await make_session()
        await append(stub, space, source, rec("zebraword alpha"))
        alone = await make_session(source=source)  # another tree: it outlives the source
        await inherit(stub, space, alone, source)
        other = await make_session()
        await append(stub, space, other, rec("quagga beta"))
        first, second = [await make_session(source=other) for _ in range(2)]
        for fork in (first, second):
            await inherit(stub, space, fork, other)
        counts = {
            q: [(h.session_id, h.reader_count) for h in await search(stub, space, q)]
            for q in ("zebraword", "quagga")
        }
        assert counts == {"zebraword": [(str(source), 2)], "quagga": [(str(other), 3)]}
        async with pool.acquire() as con, con.transaction():  # what the tree's erasure does
            gone = [source, other]
            await con.execute(
                "UPDATE sessions SET source_session_id = NULL"
                " WHERE space_id = $1 AND source_session_id = ANY ($2::uuid[])",
                space.id,
                gone,
            )
            await con.execute("SELECT stello_release_records($1, $2::uuid[], NULL)", space.id, gone)
            await con.execute(
                "DELETE FROM sessions WHERE space_id = $1 AND id = ANY ($2::uuid[])", space.id, gone
            )
        [zebra] = await search(stub, space, "zebraword")
        assert (zebra.session_id, zebra.reader_count) == (str(alone), 1)
        [quagga] = await search(stub, space, "quagga")
        assert quagga.session_id in (str(first), str(second))
        assert quagga.reader_count == 2

    async def test_root_scope(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        one, two = await make_session(), await make_session()
        kid = await make_session(parent=one)
        for sid in (one, two, kid):
            await append(stub, space, sid, rec("scoped word"))
        assert found(await search(stub, space, "scoped", root_id=str(one))) == {
            (str(one), 1),
            (str(kid), 1),
        }

    async def test_hidden_and_provisional_sessions_are_never_found(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        kept = await make_session()
        hidden = await make_session(parent=kept)
        provisional = await make_session(provisional=True)
        for sid in (kept, hidden, provisional):
            await append(stub, space, sid, rec("findable"))
        async with pool.acquire() as con:  # what DeleteSubtree's hiding transaction does
            await con.execute(
                "UPDATE sessions SET provisional_until = 'infinity'"
                " WHERE space_id = $1 AND id = $2",
                space.id,
                hidden,
            )
        assert found(await search(stub, space, "findable")) == {(str(kept), 1)}

    async def test_another_tenant_never_appears(
        self,
        stub: Stub,
        stub_for: Any,
        space: TestSpace,
        other_space: TestSpace,
        make_session: MakeSession,
    ) -> None:
        mine = await make_session()
        theirs = await make_session(space_id=other_space.id)
        other = stub_for(other_space.key)
        await append(stub, space, mine, rec("tenant word"))
        await append(other, other_space, theirs, rec("tenant word"))
        assert found(await search(stub, space, "tenant")) == {(str(mine), 1)}
        assert found(await search(other, other_space, "tenant")) == {(str(theirs), 1)}
        error = await rpc_error(search(stub, space, "tenant", session_id=str(theirs)))
        assert error.code() == grpc.StatusCode.NOT_FOUND


class TestSessions:
    async def test_labels_by_prefix_and_cjk(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        alpha = await make_session(label="Project Alpha")
        archived = await make_session(label="项目计划 Beta", status="archived")
        await make_session(label="Project Hidden", provisional=True)

        async def labels(query: str, **fields: Any) -> list[str]:
            reply = await stub.SearchSessions(
                storage_pb2.SearchSessionsRequest(space_id=space.sid, query=query, **fields)
            )
            return [s.id for s in reply.sessions]

        assert await labels("proj") == [str(alpha)]
        assert await labels("计划") == [str(archived)]
        assert await labels("bet") == [str(archived)]
        assert await labels("bet", status=common_pb2.SESSION_STATUS_ACTIVE) == []
        assert await labels("...") == []
        error = await rpc_error(labels(""))
        assert [f.field for f in field_violations(error)] == ["query"]


async def tag(pool: asyncpg.Pool, space_id: uuid.UUID, sid: uuid.UUID, **pairs: str) -> None:
    """Give a session metadata as the tree writes it (its created_at copied)."""
    async with pool.acquire() as con:
        await con.executemany(
            "INSERT INTO session_metadata (space_id, session_id, key, value, created_at)"
            " SELECT $1, $2, $3, $4, created_at FROM sessions WHERE space_id = $1 AND id = $2",
            [(space_id, sid, key, value) for key, value in pairs.items()],
        )


async def session_ids(stub: Stub, space: TestSpace, query: str, **fields: Any) -> list[str]:
    reply = await stub.SearchSessions(
        storage_pb2.SearchSessionsRequest(space_id=space.sid, query=query, **fields)
    )
    return [s.id for s in reply.sessions]


class TestSessionMetadata:
    """SearchSessions matches metadata values as it matches labels (migration 0021)."""

    async def test_values_match_keys_do_not(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        acme = await make_session(label="Plain")
        await tag(pool, space.id, acme, customer="Acme Corporation", ticket="JIRA-4411", v="v1.2.3")
        shanghai = await make_session(label="Other", status="archived")
        await tag(pool, space.id, shanghai, office="上海办公室")
        assert await session_ids(stub, space, "acme") == [str(acme)]
        assert await session_ids(stub, space, "corp") == [str(acme)]
        assert await session_ids(stub, space, "jira 4411") == [str(acme)]
        assert await session_ids(stub, space, "4411") == [str(acme)]  # an identifier's parts
        assert await session_ids(stub, space, "v1.2") == [str(acme)]
        assert await session_ids(stub, space, "customer") == []
        assert await session_ids(stub, space, "办公") == [str(shanghai)]
        assert await session_ids(stub, space, "海") == [str(shanghai)]
        assert await session_ids(stub, space, "办公上海") == []
        active = common_pb2.SESSION_STATUS_ACTIVE
        assert await session_ids(stub, space, "办公", status=active) == []

    async def test_a_query_matches_within_one_text(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """All of a query's words match the label or one value: each text on its own."""
        sid = await make_session(label="Billing issue")
        await tag(pool, space.id, sid, customer="Acme", region="north europe")
        assert await session_ids(stub, space, "north eur") == [str(sid)]
        assert await session_ids(stub, space, "acme north") == []
        assert await session_ids(stub, space, "billing acme") == []
        assert await session_ids(stub, space, "acme or nothing") == [str(sid)]

    async def test_paging_walks_each_session_once(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """Found by the label, by one value, by two values, by both: each once, newest first."""
        expected: list[uuid.UUID] = []
        for i in range(9):
            sid = await make_session(label="Orion" if i % 3 == 0 else f"Plain {i}")
            if i % 3 != 1:
                await tag(pool, space.id, sid, a="orion belt", b=f"value {i}")
            if i % 2 == 0:
                await tag(pool, space.id, sid, c="orion nebula")
            if i % 3 != 1 or i % 2 == 0:
                expected.append(sid)
            await make_session(label="Unrelated")
        seen: list[str] = []
        token = ""
        while True:
            reply = await stub.SearchSessions(
                storage_pb2.SearchSessionsRequest(
                    space_id=space.sid, query="orion", page_size=2, page_token=token
                )
            )
            assert len(reply.sessions) <= 2
            seen += [s.id for s in reply.sessions]
            token = reply.next_page_token
            if not token:
                break
        assert seen == [str(sid) for sid in reversed(expected)]

    async def test_hidden_provisional_and_other_tenants_never_found(
        self,
        stub: Stub,
        stub_for: Any,
        space: TestSpace,
        other_space: TestSpace,
        make_session: MakeSession,
        pool: asyncpg.Pool,
    ) -> None:
        kept = await make_session()
        hidden = await make_session(parent=kept)
        provisional = await make_session(provisional=True)
        theirs = await make_session(space_id=other_space.id)
        for sid in (kept, hidden, provisional):
            await tag(pool, space.id, sid, topic="quasar")
        await tag(pool, other_space.id, theirs, topic="quasar")
        async with pool.acquire() as con:  # what DeleteSubtree's hiding transaction does
            await con.execute(
                "UPDATE sessions SET provisional_until = 'infinity'"
                " WHERE space_id = $1 AND id = $2",
                space.id,
                hidden,
            )
        assert await session_ids(stub, space, "quasar") == [str(kept)]
        assert await session_ids(stub_for(other_space.key), other_space, "quasar") == [str(theirs)]


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Every node of `plan`, depth first."""
    found = [plan]
    for child in plan.get("Plans", ()):
        found += _nodes(child)
    return found


async def seed_zanzibar(
    pool: asyncpg.Pool, space: TestSpace, sid: uuid.UUID, count: int, every: int
) -> None:
    """`count` records of `sid` by SQL, every `every`th saying "zanzibar"; then ANALYZE."""
    async with pool.acquire() as con:
        await con.execute(
            "INSERT INTO records (space_id, session_id, seq, role, content,"
            " token_estimate, token_cumulative)"
            " SELECT $1, $2, i, 'user', 'ordinary words number ' || i"
            "   || CASE WHEN i % $3 = 0 THEN ' zanzibar' ELSE '' END, 1, i"
            " FROM generate_series(1, $4::int) AS i",
            space.id,
            sid,
            every,
            count,
        )
        await con.execute(
            "UPDATE sessions SET last_seq = $3 WHERE space_id = $1 AND id = $2",
            space.id,
            sid,
            count,
        )
        await con.execute("ANALYZE records")


def plan_of(relevance: bool) -> str:
    return "relevance" if relevance else "gin"


def args_of(space: uuid.UUID, scope: uuid.UUID | None, *, relevance: bool) -> tuple[object, ...]:
    """The arguments of a first page of 20 for "zanzibar" (RELEVANCE's candidates and
    horizon too)."""
    first = (space, scope, "'zanzibar'", None, None, None, None, None, 21)
    return (*first, RELEVANCE_CANDIDATES, None) if relevance else first


async def zanzibar_plan(
    con: asyncpg.Connection | asyncpg.pool.PoolConnectionProxy, space: TestSpace, *, relevance: bool
) -> dict[str, Any]:
    """EXPLAIN ANALYZE of SearchRecords' first page (20 hits) for "zanzibar" in the whole
    space, by the GIN's NEWEST statement or RELEVANCE's: the plan's top node."""
    raw = await con.fetchval(
        "EXPLAIN (ANALYZE, FORMAT JSON) " + SEARCH_RECORDS[(False, plan_of(relevance))],
        *args_of(space.id, None, relevance=relevance),
    )
    plan: dict[str, Any] = (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]
    return plan


@pytest.mark.plain_postgres(
    "reads the plan of EXPLAIN ANALYZE, which Citus wraps in its own Custom Scan"
)
async def test_a_search_reads_only_the_matches_through_the_index(
    stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
) -> None:
    """Over 20,000 records of which 2 match, the statement is a scan of `records_search`
    that reads the 2 matching rows (no scan of the space's records), then each hit's
    record by the row it was read from: its cost grows with the matches, not with the history."""
    sid = await make_session()
    await seed_zanzibar(pool, space, sid, 20000, 7000)
    assert [h.seq for h in await search(stub, space, "zanzibar")] == [14000, 7000]
    async with pool.acquire() as con:
        plan = await zanzibar_plan(con, space, relevance=False)
    reads = [
        n
        for n in _nodes(plan)
        if n.get("Relation Name") == "records" or n.get("Index Name") == "records_search"
    ]
    assert [n["Node Type"] for n in reads] == [
        "Bitmap Heap Scan",
        "Bitmap Index Scan",
        "Tid Scan",
    ], plan
    assert reads[1]["Index Name"] == "records_search"
    assert all(n["Actual Rows"] == 2 for n in reads[:2]), reads
    assert reads[0].get("Rows Removed by Index Recheck", 0) == 0
    assert (reads[2]["Actual Rows"], reads[2]["Actual Loops"]) == (1, 2), reads


@pytest.mark.plain_postgres(
    "reads the plan of EXPLAIN ANALYZE, which Citus wraps in its own Custom Scan"
)
async def test_a_session_search_reads_only_the_matches_through_the_indexes(
    stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
) -> None:
    """Over 3,000 sessions with 2 values each, of which 2 values and 1 label match, the
    statement reads the matches from `sessions_label_search` and `session_metadata_search`
    and probes each match's session by its key: no scan of the space's sessions."""
    async with pool.acquire() as con:
        await con.execute(
            "INSERT INTO sessions (space_id, id, root_id, depth, sibling_index, label, status)"
            " SELECT $1, id, id, 0, 0, 'Ordinary session ' || i"
            "   || CASE WHEN i = 1500 THEN ' zanzibar' ELSE '' END, 'active'"
            " FROM (SELECT gen_random_uuid() AS id, i FROM generate_series(1, 3000) AS i) AS n",
            space.id,
        )
        await con.execute(
            "INSERT INTO session_metadata (space_id, session_id, key, value, created_at)"
            " SELECT $1, s.id, k.key, 'plain value ' || k.key"
            "   || CASE WHEN k.key = 'b' AND s.label IN ('Ordinary session 7',"
            "     'Ordinary session 1500 zanzibar') THEN ' zanzibar' ELSE '' END, s.created_at"
            " FROM sessions s CROSS JOIN (VALUES ('a'), ('b')) AS k(key)"
            " WHERE s.space_id = $1",
            space.id,
        )
        await con.execute("ANALYZE sessions")
        await con.execute("ANALYZE session_metadata")
    assert len(await session_ids(stub, space, "zanzibar")) == 2
    async with pool.acquire() as con:
        raw = await con.fetchval(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + SEARCH_SESSIONS,
            space.id,
            "'zanzibar':*",
            None,
            None,
            None,
            21,
        )
    plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]
    reads = [
        n
        for n in _nodes(plan)
        if n.get("Relation Name") in ("sessions", "session_metadata") or "Index Name" in n
    ]
    scans = {n.get("Index Name") or n["Relation Name"]: n for n in reads}
    assert "Seq Scan" not in [n["Node Type"] for n in reads], plan
    assert scans["sessions_label_search"]["Actual Rows"] == 1, plan
    assert scans["session_metadata_search"]["Actual Rows"] == 2, plan
    probe = scans["sessions_pkey"]
    assert probe["Actual Rows"] == 1 and probe["Actual Loops"] == 2, plan


# What a big space makes of a parallel plan: worth its start (a table past
# min_parallel_table_scan_size, an estimate of thousands of rows, which a rare word gets in
# a space of 1,000,000 records), here for any table.
PARALLEL_AS_IN_A_BIG_SPACE = """
SET LOCAL parallel_setup_cost = 0;
SET LOCAL parallel_tuple_cost = 0;
SET LOCAL min_parallel_table_scan_size = 0;
SET LOCAL min_parallel_index_scan_size = 0
"""


@pytest.mark.plain_postgres("reads the plan of EXPLAIN, which Citus wraps in its own Custom Scan")
@pytest.mark.parametrize(
    "statement",
    [
        "newest",
        "newest probe",
        "relevance",
        "relevance probe",
        "in a session",
        "relevance in a session",
        "sessions",
    ],
)
async def test_a_search_starts_no_parallel_worker(
    stub: Stub,
    space: TestSpace,
    make_session: MakeSession,
    pool: asyncpg.Pool,
    direct_database_url: str,
    statement: str,
) -> None:
    """The planner estimates a word its statistics do not list (a rare one) at 0.5% of the
    rows: in a space of 1,000,000 records it planned the 50 matches of a rare word with two
    parallel workers, which read what the search alone reads but take ~12 ms to start,
    against ~1.2 ms for the search (bench/bench_search.py: 5.9x at 10x the records). With
    parallel plans made as cheap as such a space makes them, the search's own settings
    (run after, as the service runs them first in its transaction) keep every statement
    in its one backend."""
    sid = await make_session(label="Parallel zanzibar")
    await seed_zanzibar(pool, space, sid, 2000, 700)
    assert [h.seq for h in await search(stub, space, "zanzibar")] == [1400, 700]
    args: tuple[object, ...]
    in_view = statement.endswith("in a session")
    if statement == "sessions":
        sql, args = SEARCH_SESSIONS, (space.id, "'zanzibar':*", None, None, None, 21)
    else:
        relevance = statement.startswith("relevance")
        args = args_of(space.id, sid if in_view else None, relevance=relevance)
        if in_view:
            # The read of the whole view (no probe's bound), as a rare word's page makes it.
            sql, args = SEARCH_RECORDS[(True, "relevance" if relevance else "view")], (*args, None)
        else:
            sql = SEARCH_RECORDS[(False, plan_of(relevance))]
        if statement.endswith("probe"):
            probe, rows = ("relevance probe", RELEVANCE_CANDIDATES) if relevance else ("probe", 21)
            sql, args = SEARCH_RECORDS[(False, probe)], (*args, NEWEST_PROBE_ROWS * rows)
    direct = await asyncpg.connect(direct_database_url)
    try:
        async with direct.transaction():
            await direct.execute(PARALLEL_AS_IN_A_BIG_SPACE)
            await SearchRepository(direct).settings(30.0, view=in_view)
            raw = await direct.fetchval("EXPLAIN (FORMAT JSON) " + sql, *args)
    finally:
        await direct.close()
    plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]
    parallel = [
        n["Node Type"]
        for n in _nodes(plan)
        if n.get("Parallel Aware") or n["Node Type"] in ("Gather", "Gather Merge")
    ]
    assert parallel == [], plan


BLOCKS = """
SELECT coalesce(heap_blks_read, 0) + coalesce(heap_blks_hit, 0) AS heap,
       coalesce(idx_blks_read, 0) + coalesce(idx_blks_hit, 0) AS index
FROM pg_statio_user_tables WHERE relname = 'records'
"""


VACUUMING_RECORDS = """
SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND backend_type = 'autovacuum worker'
  AND query ~ 'public\\.records( |$)'
"""


@asynccontextmanager
async def no_autovacuum_of_records(counter: asyncpg.Connection) -> AsyncIterator[None]:
    """Autovacuum kept off `records` meanwhile (its reads count in pg_statio, as any
    backend's: one that ran during ci4's count added 2,748 heap blocks and 4,062 index
    blocks to a search that reads 10 and 11). A run already going yields to the ALTER
    TABLE's lock, as autovacuum does; the setting is reset after."""
    await counter.execute("ALTER TABLE records SET (autovacuum_enabled = false)")
    try:
        for _ in range(500):
            if not await counter.fetchval(VACUUMING_RECORDS):
                break
            await asyncio.sleep(0.01)
        yield
    finally:
        await counter.execute("ALTER TABLE records RESET (autovacuum_enabled)")


async def records_read(counter: asyncpg.Connection) -> tuple[int, int, int]:
    """Tuples, heap blocks and index blocks read from `records` so far (every other
    backend's counters flushed)."""
    await end_other_backends(counter)
    tuples = await counter.fetchrow(READS, "records")
    blocks = await counter.fetchrow(BLOCKS)
    assert tuples is not None and blocks is not None
    return int(tuples["heap"]) + int(tuples["index"]), int(blocks["heap"]), int(blocks["index"])


T = TypeVar("T")


async def records_read_by(
    counter: asyncpg.Connection, call: Awaitable[T]
) -> tuple[tuple[int, int, int], T]:
    """What `call` read of `records` (`records_read`'s three counts, each its increase
    while it ran), and what it answered."""
    before = await records_read(counter)
    answer = await call
    after = await records_read(counter)
    read = tuple(a - b for a, b in zip(after, before, strict=True))
    return (read[0], read[1], read[2]), answer


@pytest.mark.plain_postgres(
    "counts the rows and blocks read in the statistics of the database it connects to; on "
    "Citus the coordinator reads none, the workers' shards do"
)
async def test_a_rare_word_reads_the_same_in_a_space_ten_times_larger(
    stub: Stub,
    space: TestSpace,
    make_session: MakeSession,
    pool: asyncpg.Pool,
    direct_database_url: str,
) -> None:
    """A rare word's search reads the first probe of the space's newest records (bounded:
    NEWEST_PROBE_FIRST rows per row of the page, `records_newest`), which finds too few of its
    matches, then its matches through `records_search`: the tuples and blocks it reads from
    `records` (heap and indexes, in pg_stat and pg_statio) are no more when its space holds
    10x the records, within a block of the index per match (the space's posting tree in the
    GIN grows a level)."""
    sid = await make_session()
    counter = await asyncpg.connect(direct_database_url)
    try:
        async with no_autovacuum_of_records(counter):
            reads = await _two_sizes(stub, space, sid, pool, counter)
    finally:
        await counter.close()
    (tuples, heap, index), (tuples_10x, heap_10x, index_10x) = reads
    assert tuples_10x <= tuples, reads
    assert heap_10x <= heap, reads
    assert index_10x <= index + 5, reads


async def _two_sizes(
    stub: Stub, space: TestSpace, sid: uuid.UUID, pool: asyncpg.Pool, counter: asyncpg.Connection
) -> list[tuple[int, ...]]:
    """What the search of a rare word reads in a space of 2,000 records, then of 20,000."""
    insert = (
        "INSERT INTO records (space_id, session_id, seq, role, content,"
        " token_estimate, token_cumulative)"
        " SELECT $1, $2, i, 'user', 'ordinary words number ' || i"
        "   || CASE WHEN i % 400 = 0 AND i <= 2000 THEN ' zanzibar' ELSE '' END, 1, i"
        " FROM generate_series($3::int, $4::int) AS i"
    )
    reads: list[tuple[int, ...]] = []
    for first, last in ((1, 2_000), (2_001, 20_000)):
        async with pool.acquire() as con:
            await con.execute(insert, space.id, sid, first, last)
            await con.execute(
                "UPDATE sessions SET last_seq = $3 WHERE space_id = $1 AND id = $2",
                space.id,
                sid,
                last,
            )
            await con.execute("ANALYZE records")
        await search(stub, space, "zanzibar")  # the server's connections warmed
        read, hits = await records_read_by(counter, search(stub, space, "zanzibar"))
        assert [h.seq for h in hits] == [2000, 1600, 1200, 800, 400]
        reads.append(read)
    return reads


@pytest.mark.plain_postgres(
    "reads the plan of EXPLAIN ANALYZE, which Citus wraps in its own Custom Scan"
)
@pytest.mark.parametrize("order", ["newest", "relevance"])
async def test_only_the_page_s_hits_are_looked_up(
    stub: Stub, space: TestSpace, pool: asyncpg.Pool, direct_database_url: str, order: str
) -> None:
    """300 matches, each in a session of its own: the matches are sorted by their keys
    first, and only the page's hits (21: the page and one more) have their session (by
    key) and their record's content (by row) looked up. The planner, without parallel
    workers, probed every match's session before its top-N sort (300 probes here; 10,000
    in a space of 1,000,000 records with a word in 1% of them, half the search's time).
    RELEVANCE ranks the newest visible matches, up to RELEVANCE_CANDIDATES of them: each
    candidate's session is looked up (newest first, until there are enough) and its vector
    read by its row, then the page's hits' content."""
    async with pool.acquire() as con:
        await con.execute(
            "INSERT INTO sessions (space_id, id, root_id, depth, sibling_index, label, last_seq)"
            " SELECT $1, id, id, 0, 0, 'many ' || i, 1"
            " FROM (SELECT gen_random_uuid() AS id, i FROM generate_series(1, 300) AS i) AS n",
            space.id,
        )
        await con.execute(
            "INSERT INTO records (space_id, session_id, seq, role, content,"
            " token_estimate, token_cumulative)"
            " SELECT $1, id, 1, 'user', 'a zanzibar of ' || label, 1, 1"
            " FROM sessions WHERE space_id = $1",
            space.id,
        )
        await con.execute("ANALYZE records")
        await con.execute("ANALYZE sessions")
    assert len(await search(stub, space, "zanzibar", page_size=20)) == 20
    direct = await asyncpg.connect(direct_database_url)
    try:
        async with direct.transaction():
            await SearchRepository(direct).settings(30.0)
            plan = await zanzibar_plan(direct, space, relevance=order == "relevance")
    finally:
        await direct.close()
    nodes = _nodes(plan)
    sessions = sum(n["Actual Loops"] for n in nodes if n.get("Index Name") == "sessions_pkey")
    scans = [n for n in nodes if n.get("Relation Name") == "records"]
    matches = [n["Actual Rows"] for n in scans if n["Node Type"] != "Tid Scan"]
    fetched = [(n["Actual Rows"], n["Actual Loops"]) for n in scans if n["Node Type"] == "Tid Scan"]
    assert matches == [300], plan
    if order == "relevance":
        assert 300 <= RELEVANCE_CANDIDATES
        assert sessions == 300, plan
        assert sorted(fetched) == [(1, 21), (1, 300)], plan
    else:
        assert sessions == 21, plan
        assert fetched == [(1, 21)], plan


class TestTimeout:
    """A search's statements are bounded (STELLO_STORAGE_SEARCH_TIMEOUT_S): past it,
    FAILED_PRECONDITION SEARCH_TOO_BROAD with a message that says how to narrow it, never a
    connection held for as long as the read takes. A read held up by a lock (here an
    ACCESS EXCLUSIVE lock on the table it reads) stands for a search that reads too much."""

    @pytest.mark.parametrize("rpc", ["SearchRecords", "SearchSessions"])
    async def test_a_search_past_its_time_is_search_too_broad(
        self,
        stub: Stub,
        pool: asyncpg.Pool,
        space: TestSpace,
        make_session: MakeSession,
        start_server: ServerStarter,
        rpc: str,
    ) -> None:
        sid = await make_session()
        await append(stub, space, sid, rec("the zanzibar ledger"))
        config = StorageSettings(search_timeout_s=0.2)
        server = await start_server(partial(create_app, config=config))
        table = "records" if rpc == "SearchRecords" else "sessions"
        request = (
            storage_pb2.SearchRecordsRequest(space_id=space.sid, query="zanzibar")
            if rpc == "SearchRecords"
            else storage_pb2.SearchSessionsRequest(space_id=space.sid, query="zanzibar")
        )
        async with server.channel(space.key) as channel:
            bounded = storage_pb2_grpc.SessionStorageStub(channel)
            call = getattr(bounded, rpc)
            async with pool.acquire() as holder, holder.transaction():
                await holder.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
                error = await rpc_error(call(request, timeout=30))
            assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert error_info_reason(error) == SEARCH_TOO_BROAD
            assert error.details() == (
                "the search took longer than 0.2 s (STELLO_STORAGE_SEARCH_TIMEOUT_S); narrow "
                "it with session_id or root_id, or more words"
            )
            await call(request, timeout=30)  # the lock gone, the same search is answered

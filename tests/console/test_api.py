"""The console's JSON endpoints and SendStream relay, over HTTP against a real gateway."""

from __future__ import annotations

import asyncio
import json
import socket
import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest

from stello.common.v1 import common_pb2
from stello_console import Caller, ConsoleOptions, running_console
from stello_console.inputs import MAX_BODY_BYTES
from tests.console.conftest import REPLY_HEAD, ConsoleStack
from tests.console.http import Reply, exchange, fetch, signed_headers
from tests.gateway.conftest import record
from tests.gateway.turns_support import wait_for
from tests.support.fixtures import TestSpace
from tests.tree.seed import chain, seed_topology

pytestmark = pytest.mark.sql


@dataclass
class Api:
    """Signed-in requests from the console's own origin."""

    console: ConsoleStack
    signed: dict[str, str]

    async def call(
        self, method: str, path: str, body: Any = None, raw: bytes | None = None
    ) -> Reply:
        """One request with the cookie, the page key and the console's Origin (the body:
        `body` as JSON, or the bytes `raw`)."""
        headers = {**self.signed, "Origin": f"http://127.0.0.1:{self.console.port}"}
        if body is not None or raw is not None:
            headers["Content-Type"] = "application/json"
        return await fetch(
            self.console.port, path, method=method, headers=headers, body=body, raw=raw
        )

    async def ok(self, method: str, path: str, body: Any = None) -> Any:
        """The JSON of a call that must answer 200."""
        reply = await self.call(method, path, body)
        assert reply.status == 200, reply.text
        return reply.json()


@pytest.fixture(name="api")
async def _api(console: ConsoleStack) -> Api:
    assert console.console.launch is not None
    reply = await fetch(console.port, f"/?token={console.console.launch.token}")
    assert reply.header("set-cookie") is not None
    return Api(console, signed_headers(reply))


async def seed_records(console: ConsoleStack, session_id: str, count: int) -> None:
    """`count` user records (contents m1, m2, ...) straight into storage."""
    await console.stack.append(session_id, *(record("user", f"m{n}") for n in range(1, count + 1)))


class TestRecords:
    async def test_records_come_newest_page_first_then_older_by_token(self, api: Api) -> None:
        """120 records, pages of 50: #71..#120, then by its token #21..#70, then #1..#20."""
        root = await api.console.stack.root(label="Long")
        await seed_records(api.console, root.id, 120)
        path = f"/api/sessions/{root.id}/records?limit=50"
        first = await api.ok("GET", path)
        assert [r["seq"] for r in first["records"]] == list(range(71, 121))
        second = await api.ok("GET", f"{path}&page_token={first['next_page_token']}")
        assert [r["seq"] for r in second["records"]] == list(range(21, 71))
        last = await api.ok("GET", f"{path}&page_token={second['next_page_token']}")
        assert [r["seq"] for r in last["records"]] == list(range(1, 21))
        assert last["next_page_token"] == ""

    async def test_records_after_a_seq_walk_to_newer_ones(self, api: Api) -> None:
        """?after=SEQ: the records after it, oldest first, the token leading to newer ones."""
        root = await api.console.stack.root(label="Growing")
        await seed_records(api.console, root.id, 7)
        path = f"/api/sessions/{root.id}/records?after=2&limit=3"
        first = await api.ok("GET", path)
        assert [r["seq"] for r in first["records"]] == [3, 4, 5]
        rest = await api.ok("GET", f"{path}&page_token={first['next_page_token']}")
        assert [r["seq"] for r in rest["records"]] == [6, 7]
        assert rest["next_page_token"] == ""
        none = await api.ok("GET", f"/api/sessions/{root.id}/records?after=7")
        assert none == {"records": [], "next_page_token": ""}

    async def test_records_before_a_seq_walk_to_older_ones(self, api: Api) -> None:
        """?before=SEQ: the newest records below it, the token leading to older ones."""
        root = await api.console.stack.root(label="Window")
        await seed_records(api.console, root.id, 9)
        path = f"/api/sessions/{root.id}/records?before=6&limit=3"
        first = await api.ok("GET", path)
        assert [r["seq"] for r in first["records"]] == [3, 4, 5]
        rest = await api.ok("GET", f"{path}&page_token={first['next_page_token']}")
        assert [r["seq"] for r in rest["records"]] == [1, 2]
        assert rest["next_page_token"] == ""

    async def test_pages_cut_by_bytes_still_lead_to_older(self, api: Api) -> None:
        """60 records of 100 KiB: pages of 50 hold fewer (4 MiB bound) yet reach #1 once each."""
        root = await api.console.stack.root(label="Large")
        big = [record("user", f"{n:03}" + "w" * 100 * 1024) for n in range(1, 61)]
        for start in range(0, 60, 10):
            await api.console.stack.append(root.id, *big[start : start + 10])
        seen: list[int] = []
        token = ""
        while True:
            page = await api.ok(
                "GET", f"/api/sessions/{root.id}/records?limit=50&page_token={token}"
            )
            seqs = [r["seq"] for r in page["records"]]
            assert 0 < len(seqs) < 50
            seen = seqs + seen
            token = page["next_page_token"]
            if not token:
                break
        assert seen == list(range(1, 61))

    async def test_a_record_shows_role_tool_calls_and_answer(self, api: Api) -> None:
        """Roles, tool calls and the tool record's call id travel as plain JSON."""
        root = await api.console.stack.root(label="Tools")
        await api.console.stack.append(
            root.id,
            record("user", "find it"),
            record(
                "assistant",
                "",
                tool_calls=[common_pb2.ToolCall(id="c1", name="search", arguments_json="{}")],
            ),
            record("tool", "found", tool_call_id="c1"),
        )
        page = await api.ok("GET", f"/api/sessions/{root.id}/records")
        roles = [(r["role"], r["tool_call_id"]) for r in page["records"]]
        assert roles == [("user", None), ("assistant", None), ("tool", "c1")]
        assert page["records"][1]["tool_calls"] == [
            {"id": "c1", "name": "search", "arguments_json": "{}"}
        ]

    @pytest.mark.parametrize(
        ("query", "field"),
        [
            pytest.param("limit=0", "limit", id="limit-zero"),
            pytest.param("limit=5000", "limit", id="limit-too-big"),
            pytest.param("after=x", "after", id="after-not-a-number"),
            pytest.param("after=-1", "after", id="after-negative"),
            pytest.param("after=99999999999999999999999", "after", id="after-past-int64"),
            pytest.param("before=0", "before", id="before-zero"),
            pytest.param("after=1&before=5", "after, before", id="after-and-before"),
            pytest.param("page_token=nope", "page_token", id="token-not-issued"),
        ],
    )
    async def test_bad_paging_names_the_parameter(self, api: Api, query: str, field: str) -> None:
        """A bad page parameter is 400 INVALID_ARGUMENT naming it."""
        root = await api.console.stack.root()
        reply = await api.call("GET", f"/api/sessions/{root.id}/records?{query}")
        assert reply.status == 400
        error = reply.json()["error"]
        assert error["code"] == "INVALID_ARGUMENT" and field in error["message"].split(":")[0]


class TestSession:
    async def test_the_view_joins_topology_config_and_slots(self, api: Api) -> None:
        """GetSession's view: label, status, children, config, system prompt, memory, insight."""
        stack = api.console.stack
        root = await stack.root(label="Joined", system_prompt="Be kind.")
        child = await stack.fork(root.id, "Kid")
        await api.ok("PUT", f"/api/sessions/{root.id}/insight", {"content": "note"})
        await api.ok("PUT", f"/api/sessions/{root.id}/memory", {"content": "remembered"})
        view = await api.ok("GET", f"/api/sessions/{root.id}")
        assert view["label"] == "Joined" and view["status"] == "active"
        assert view["children"] == [child.id]
        assert view["system_prompt"] == "Be kind."
        assert view["config"]["system_prompt"] == "Be kind."
        assert (view["insight"], view["memory"]) == ("note", "remembered")

    async def test_an_unknown_session_is_the_gateways_not_found(self, api: Api) -> None:
        """404 with the gateway's code and message."""
        reply = await api.call("GET", "/api/sessions/00000000-0000-4000-8000-000000000000")
        assert reply.status == 404
        assert reply.json()["error"]["code"] == "NOT_FOUND"
        assert reply.json()["error"]["message"]

    async def test_a_malformed_id_is_invalid_argument(self, api: Api) -> None:
        """A session id that is not a UUID is 400 with the gateway's field violation text."""
        reply = await api.call("GET", "/api/sessions/not-a-uuid")
        assert reply.status == 400 and reply.json()["error"]["code"] == "INVALID_ARGUMENT"

    @pytest.mark.parametrize(
        "raw",
        [
            pytest.param(b'{"content": ' + b"[" * 10_000 + b"]" * 10_000 + b"}", id="deep"),
            pytest.param(b'{"content": NaN}', id="nan"),
        ],
    )
    async def test_a_body_json_does_not_read_is_invalid_argument(
        self, api: Api, raw: bytes
    ) -> None:
        """A body nested past what Python's json reads (it raised RecursionError: a 500) or
        holding NaN is 400 INVALID_ARGUMENT, "must be a JSON object"; nothing is set."""
        root = await api.console.stack.root()
        reply = await api.call("PUT", f"/api/sessions/{root.id}/insight", raw=raw)
        assert reply.status == 400, reply.text
        error = reply.json()["error"]
        assert error["code"] == "INVALID_ARGUMENT"
        assert "must be a JSON object" in error["message"]
        assert not (await api.console.stack.view(root.id)).HasField("insight")

    async def test_put_insight_on_an_archived_session_is_refused(self, api: Api) -> None:
        """FAILED_PRECONDITION SESSION_ARCHIVED arrives with its reason; the insight is unset."""
        root = await api.console.stack.root()
        await api.ok("POST", f"/api/sessions/{root.id}/archive", {})
        reply = await api.call("PUT", f"/api/sessions/{root.id}/insight", {"content": "x"})
        assert reply.status == 412
        assert reply.json()["error"]["reason"] == "SESSION_ARCHIVED"
        assert not (await api.console.stack.view(root.id)).HasField("insight")


class TestLineage:
    async def test_the_ancestors_come_nearest_first_as_digests(self, api: Api) -> None:
        """root > mid > leaf: the leaf's lineage is mid then root, with status, turns and slots."""
        stack = api.console.stack
        root = await stack.root(label="Root")
        mid = await stack.fork(root.id, "Mid")
        leaf = await stack.fork(mid.id, "Leaf")
        await api.ok("PUT", f"/api/sessions/{root.id}/memory", {"content": "kept"})
        await api.ok("PUT", f"/api/sessions/{mid.id}/insight", {"content": "hint"})
        await api.ok("POST", f"/api/sessions/{root.id}/archive", {})
        reply = await api.ok("GET", f"/api/sessions/{leaf.id}/lineage")
        assert reply == {
            "ancestors": [
                {
                    "id": mid.id,
                    "parent_id": root.id,
                    "label": "Mid",
                    "status": "active",
                    "turn_count": 0,
                    "memory": None,
                    "insight": "hint",
                    "pinned": False,
                    "metadata": {},
                },
                {
                    "id": root.id,
                    "parent_id": None,
                    "label": "Root",
                    "status": "archived",
                    "turn_count": 0,
                    "memory": "kept",
                    "insight": None,
                    "pinned": False,
                    "metadata": {},
                },
            ],
            "next_page_token": "",
        }
        assert await api.ok("GET", f"/api/sessions/{root.id}/lineage") == {
            "ancestors": [],
            "next_page_token": "",
        }

    async def test_a_long_chain_comes_page_by_page(self, api: Api, pool: asyncpg.Pool) -> None:
        """A chain of 12: the leaf's 11 ancestors in pages of 5, 5 and 1, each once, in order."""
        ids = [str(i) for i in await seed_topology(pool, api.console.stack.space.id, chain(12))]
        path = f"/api/sessions/{ids[-1]}/lineage?page_size=5"
        seen: list[list[str]] = []
        token = ""
        while True:
            page = await api.ok("GET", f"{path}&page_token={token}" if token else path)
            seen.append([a["id"] for a in page["ancestors"]])
            token = page["next_page_token"]
            if not token:
                break
        assert [len(p) for p in seen] == [5, 5, 1]
        assert [i for p in seen for i in p] == list(reversed(ids[:-1]))

    async def test_an_unknown_session_is_not_found(self, api: Api) -> None:
        """404 with the gateway's code and message."""
        reply = await api.call("GET", "/api/sessions/00000000-0000-4000-8000-000000000000/lineage")
        assert reply.status == 404
        error = reply.json()["error"]
        assert error["code"] == "NOT_FOUND" and error["message"]

    @pytest.mark.parametrize(
        ("query", "field"),
        [
            pytest.param("page_size=0", "page_size", id="size-zero"),
            pytest.param("page_size=1001", "page_size", id="size-too-big"),
            pytest.param("page_size=x", "page_size", id="size-not-a-number"),
            pytest.param("page_token=nope", "page_token", id="token-not-issued"),
        ],
    )
    async def test_bad_paging_names_the_parameter(self, api: Api, query: str, field: str) -> None:
        """A bad page parameter is 400 INVALID_ARGUMENT naming it."""
        root = await api.console.stack.root()
        reply = await api.call("GET", f"/api/sessions/{root.id}/lineage?{query}")
        assert reply.status == 400
        error = reply.json()["error"]
        assert error["code"] == "INVALID_ARGUMENT" and field in error["message"].split(":")[0]

    async def test_refused_without_the_token_or_from_another_origin(self, api: Api) -> None:
        """No cookie (the launch token never exchanged), a foreign Origin or Host: 403, and
        nothing of the lineage in the answer."""
        root = await api.console.stack.root()
        child = await api.console.stack.fork(root.id, "Kid")
        path = f"/api/sessions/{child.id}/lineage"
        bare = await fetch(api.console.port, path)
        foreign = await fetch(
            api.console.port,
            path,
            headers={**api.signed, "Origin": "http://evil.example"},
        )
        rebound = await fetch(api.console.port, path, host="evil.example", headers=api.signed)
        assert (bare.status, foreign.status, rebound.status) == (403, 403, 403)
        assert root.id not in bare.text + foreign.text + rebound.text

    async def test_a_deployed_console_answers_it_for_the_key_only(
        self, key_console: ConsoleStack
    ) -> None:
        """The key the page sends: none is 401 asking to sign in; the space's key reads it."""
        space = key_console.stack.space
        root = await key_console.stack.root(label="Top")
        child = await key_console.stack.fork(root.id, "Kid")
        path = f"/api/sessions/{child.id}/lineage"
        bare = await fetch(key_console.port, path)
        assert bare.status == 401 and bare.json()["error"]["code"] == "UNAUTHENTICATED"
        keyed = await fetch(
            key_console.port,
            path,
            headers={"Authorization": f"Bearer {space.key}", "X-Stello-Space": space.sid},
        )
        assert keyed.status == 200
        assert [a["label"] for a in keyed.json()["ancestors"]] == ["Top"]

    async def test_a_space_the_key_does_not_reach_is_a_sign_in_error(
        self, key_console: ConsoleStack
    ) -> None:
        """The space's key with another space id: 400 INVALID_ARGUMENT, reason SIGN_IN,
        naming the sign-in form's field (the gateway's NOT_FOUND for a space not its own)."""
        other = str(uuid.uuid4())
        headers = {"Authorization": f"Bearer {key_console.stack.space.key}"}
        reply = await fetch(
            key_console.port, "/api/tree", headers={**headers, "X-Stello-Space": other}
        )
        assert reply.status == 400, reply.text
        error = reply.json()["error"]
        assert (error["code"], error["reason"]) == ("INVALID_ARGUMENT", "SIGN_IN")
        assert f"this key reaches no space with id {other}" in error["message"]
        assert "Space id field" in error["message"]


class TestBodies:
    """A body is read after the caller is known, and only up to MAX_BODY_BYTES."""

    @pytest.mark.parametrize("path", ["/api/roots", f"/api/sessions/{uuid.uuid4()}/send"])
    async def test_a_deployed_console_refuses_a_keyless_body_before_reading_it(
        self, key_console: ConsoleStack, path: str
    ) -> None:
        """A gigabyte promised, 8 bytes sent: 401 at once (the console never waits for the rest)."""
        origin = f"http://127.0.0.1:{key_console.port}"
        head = [
            f"POST {path} HTTP/1.1",
            f"Origin: {origin}",
            "Content-Type: application/json",
            f"Content-Length: {10**9}",
        ]
        reply = await exchange(key_console.port, head, b'{"label"', within_s=5)
        assert reply.status == 401, reply.text
        assert reply.json()["error"]["code"] == "UNAUTHENTICATED"

    async def test_a_signed_in_body_over_the_limit_is_refused_naming_it(self, api: Api) -> None:
        """Content-Length over the limit: 413 before the body; a chunked one: 413 once past it."""
        headers = [f"{name}: {value}" for name, value in api.signed.items()]
        headers.append(f"Origin: http://127.0.0.1:{api.console.port}")
        declared = await exchange(
            api.console.port,
            ["POST /api/roots HTTP/1.1", *headers, f"Content-Length: {MAX_BODY_BYTES + 1}"],
            b"{",
            within_s=5,
        )
        chunk = b'{"label": "' + b"a" * (MAX_BODY_BYTES + 10) + b'"}'
        streamed = await exchange(
            api.console.port,
            ["POST /api/roots HTTP/1.1", *headers, "Transfer-Encoding: chunked"],
            b"%x\r\n%s\r\n0\r\n\r\n" % (len(chunk), chunk),
        )
        for reply in (declared, streamed):
            assert reply.status == 413, reply.text
            error = reply.json()["error"]
            assert error["code"] == "RESOURCE_EXHAUSTED"
            assert f"limit of {MAX_BODY_BYTES} bytes" in error["message"]
        assert (await api.ok("GET", "/api/tree"))["nodes"] == []  # no root was made


class TestFork:
    async def test_fork_inherits_up_to_the_given_seq(self, api: Api) -> None:
        """context inherit with inherit_until_seq 3: the child has records 1..3."""
        root = await api.console.stack.root(label="Src")
        await seed_records(api.console, root.id, 6)
        child = await api.ok(
            "POST",
            f"/api/sessions/{root.id}/fork",
            {"label": "Cut", "context": "inherit", "inherit_until_seq": 3, "request_id": "r1"},
        )
        assert child["label"] == "Cut" and child["parent_id"] == root.id
        records = await api.console.stack.records(child["id"])
        assert [r.content for r in records] == ["m1", "m2", "m3"]

    async def test_a_repeated_fork_request_makes_one_child(self, api: Api) -> None:
        """The same request_id twice answers the same child (the page may retry a click)."""
        root = await api.console.stack.root()
        body = {"label": "Once", "context": "none", "request_id": "same"}
        first = await api.ok("POST", f"/api/sessions/{root.id}/fork", body)
        second = await api.ok("POST", f"/api/sessions/{root.id}/fork", body)
        assert first["id"] == second["id"]
        assert len((await api.console.stack.view(root.id)).node.children) == 1

    async def test_a_profile_with_variables(self, api: Api) -> None:
        """profile and profile_vars reach the gateway (the profile's prompt is rendered)."""
        root = await api.console.stack.root()
        child = await api.ok(
            "POST",
            f"/api/sessions/{root.id}/fork",
            {
                "label": "Researcher",
                "profile": "research",
                "profile_vars": {"topic": "ferns", "region": "Chile"},
            },
        )
        view = await api.console.stack.view(child["id"])
        assert "You research ferns in Chile." in view.system_prompt

    @pytest.mark.parametrize(
        ("body", "field"),
        [
            pytest.param({"label": 3}, "label", id="label-not-text"),
            pytest.param({"label": "x", "context": "copy"}, "context", id="unknown-context"),
            pytest.param(
                {"label": "x", "inherit_until_seq": "3"}, "inherit_until_seq", id="seq-not-int"
            ),
            pytest.param({"label": "x", "profile_vars": ["a"]}, "profile_vars", id="vars-list"),
            pytest.param(
                {"label": "x", "context": "inherit", "inherit_until_seq": 10**23},
                "inherit_until_seq",
                id="seq-past-int64",
            ),
            pytest.param({"label": "f\ud800"}, "label", id="label-lone-surrogate"),
            pytest.param(
                {"label": "x", "profile_vars": {"a": "b\udfff"}}, "profile_vars", id="var-surrogate"
            ),
        ],
    )
    async def test_bad_fork_input_names_the_field_and_creates_nothing(
        self, api: Api, body: dict[str, Any], field: str
    ) -> None:
        """A wrongly typed field is 400 naming it; no child appears."""
        root = await api.console.stack.root()
        reply = await api.call("POST", f"/api/sessions/{root.id}/fork", body)
        assert reply.status == 400 and reply.json()["error"]["message"].startswith(f"{field}:")
        assert list((await api.console.stack.view(root.id)).node.children) == []

    async def test_an_empty_label_is_the_gateways_invalid_argument(self, api: Api) -> None:
        """The gateway's own validation message comes through."""
        root = await api.console.stack.root()
        reply = await api.call("POST", f"/api/sessions/{root.id}/fork", {"label": ""})
        assert reply.status == 400 and "label" in reply.json()["error"]["message"]

    async def test_a_body_that_is_not_json_is_refused(self, api: Api) -> None:
        """A non-object body is 400 saying so."""
        root = await api.console.stack.root()
        reply = await api.call("POST", f"/api/sessions/{root.id}/fork", ["label"])
        assert reply.status == 400 and "JSON object" in reply.json()["error"]["message"]


class TestRename:
    async def test_rename_answers_the_session_under_its_new_label(self, api: Api) -> None:
        """PUT {label}: the session as it now is; GetSession and the forest say the new label;
        200 astral-plane characters (400 UTF-16 code units) are a label the gateway keeps."""
        root = await api.console.stack.root(label="Old name")
        renamed = await api.ok("PUT", f"/api/sessions/{root.id}/label", {"label": "New name"})
        assert renamed["id"] == root.id and renamed["label"] == "New name"
        assert (await api.console.stack.view(root.id)).node.label == "New name"
        emoji = "\U0001f600" * 200
        renamed = await api.ok("PUT", f"/api/sessions/{root.id}/label", {"label": emoji})
        assert renamed["label"] == emoji
        nodes = (await api.ok("GET", "/api/tree"))["nodes"]
        assert [node["label"] for node in nodes] == [emoji]

    @pytest.mark.parametrize(
        ("body", "status", "words"),
        [
            pytest.param({}, 400, "label: must be text", id="no-label"),
            pytest.param({"label": 3}, 400, "label: must be text", id="label-not-text"),
            pytest.param({"label": "a\ud800"}, 400, "label: is not valid Unicode", id="surrogate"),
            pytest.param({"label": " "}, 400, "label: must not be empty", id="blank"),
            pytest.param(
                {"label": "\U0001f600" * 201},
                400,
                "label: must be at most 200 characters, got 201",
                id="201-astral-characters",
            ),
            pytest.param({"label": "two\nlines"}, 400, "label: must be one line", id="newline"),
        ],
    )
    async def test_a_refused_label_says_why_and_changes_nothing(
        self, api: Api, body: dict[str, Any], status: int, words: str
    ) -> None:
        """A missing, mistyped, empty, too long or multi-line label is 400 naming `label`;
        the session keeps its label."""
        root = await api.console.stack.root(label="Kept")
        reply = await api.call("PUT", f"/api/sessions/{root.id}/label", body)
        assert reply.status == status, reply.text
        error = reply.json()["error"]
        assert error["code"] == "INVALID_ARGUMENT" and words in error["message"]
        assert (await api.console.stack.view(root.id)).node.label == "Kept"

    async def test_renaming_a_missing_or_archived_session_is_refused(self, api: Api) -> None:
        """A session not in the space is 404; an archived one 412 SESSION_ARCHIVED, unchanged."""
        missing = await api.call("PUT", f"/api/sessions/{uuid.uuid4()}/label", {"label": "x"})
        assert missing.status == 404 and missing.json()["error"]["code"] == "NOT_FOUND"
        root = await api.console.stack.root(label="Shelved")
        await api.ok("POST", f"/api/sessions/{root.id}/archive", {})
        archived = await api.call("PUT", f"/api/sessions/{root.id}/label", {"label": "x"})
        assert archived.status == 412 and archived.json()["error"]["reason"] == "SESSION_ARCHIVED"
        assert (await api.console.stack.view(root.id)).node.label == "Shelved"

    async def test_a_rename_from_another_origin_or_without_a_key_changes_nothing(
        self, api: Api, key_console: ConsoleStack
    ) -> None:
        """The local console refuses a rename without Origin or from another origin (403);
        a deployed one refuses one from its own origin without a key (401) and renames with
        the space's key."""
        root = await api.console.stack.root(label="Guarded")
        path = f"/api/sessions/{root.id}/label"
        for origin in ({}, {"Origin": "http://evil.example"}):
            headers = {**api.signed, **origin, "Content-Type": "application/json"}
            reply = await fetch(
                api.console.port, path, method="PUT", headers=headers, body={"label": "x"}
            )
            assert reply.status == 403, reply.text
        assert (await api.console.stack.view(root.id)).node.label == "Guarded"
        theirs = await key_console.stack.root(label="Keyed")
        path = f"/api/sessions/{theirs.id}/label"
        body = {"label": "Keyed anew"}
        own = {"Origin": f"http://127.0.0.1:{key_console.port}"}
        bare = await fetch(key_console.port, path, method="PUT", headers=own, body=body)
        assert bare.status == 401
        space = key_console.stack.space
        keyed = await fetch(
            key_console.port,
            path,
            method="PUT",
            headers={
                **own,
                "Authorization": f"Bearer {space.key}",
                "X-Stello-Space": space.sid,
            },
            body=body,
        )
        assert keyed.status == 200 and keyed.json()["label"] == "Keyed anew"


class TestSend:
    async def test_send_relays_deltas_then_the_stored_turn(self, api: Api) -> None:
        """Server-sent events: text deltas, then `done` with the stored user and assistant."""
        root = await api.console.stack.root()
        reply = await api.call("POST", f"/api/sessions/{root.id}/send", {"content": "hi"})
        assert reply.status == 200
        assert (reply.header("content-type") or "").startswith("text/event-stream")
        events = reply.events()
        names = [name for name, _ in events]
        assert names == ["delta", "delta", "done"]
        assert events[0][1] == {"text": REPLY_HEAD}
        done = events[-1][1]
        assert [(r["seq"], r["role"]) for r in done["records"]] == [(1, "user"), (2, "assistant")]
        assert done["assistant"]["content"] == f"{REPLY_HEAD}reply to: hi"

    async def test_a_refused_send_is_an_error_event_and_stores_nothing(self, api: Api) -> None:
        """Sending to an archived session: one `error` event with SESSION_ARCHIVED."""
        root = await api.console.stack.root()
        await api.ok("POST", f"/api/sessions/{root.id}/archive", {})
        reply = await api.call("POST", f"/api/sessions/{root.id}/send", {"content": "hi"})
        events = reply.events()
        assert [name for name, _ in events] == ["error"]
        assert events[0][1]["code"] == "FAILED_PRECONDITION"
        assert events[0][1]["reason"] == "SESSION_ARCHIVED"
        assert await api.console.stack.records(root.id) == []

    async def test_send_needs_content(self, api: Api) -> None:
        """No content: 400 naming it, before any call."""
        root = await api.console.stack.root()
        reply = await api.call("POST", f"/api/sessions/{root.id}/send", {})
        assert reply.status == 400 and reply.json()["error"]["message"].startswith("content:")


class TestTextThatIsNotUnicode:
    @pytest.mark.parametrize(
        ("method", "path", "body", "field"),
        [
            pytest.param("POST", "/api/roots", {"label": "a\udfffb"}, "label", id="root-label"),
            pytest.param(
                "POST", "/api/roots", {"system_prompt": "\ud800"}, "system_prompt", id="prompt"
            ),
            pytest.param(
                "PUT", "/api/sessions/{id}/insight", {"content": "a\ud800"}, "content", id="insight"
            ),
            pytest.param(
                "PUT", "/api/sessions/{id}/memory", {"content": "\udc00"}, "content", id="memory"
            ),
            pytest.param(
                "POST", "/api/sessions/{id}/send", {"content": "x\ud800"}, "content", id="send"
            ),
        ],
    )
    async def test_a_lone_surrogate_is_refused_naming_the_field(
        self, api: Api, method: str, path: str, body: dict[str, Any], field: str
    ) -> None:
        """JSON's "\\ud800" (what JSON.stringify makes of a lone surrogate) is 400
        INVALID_ARGUMENT naming the field (a 500 and a traceback before); nothing is made."""
        root = await api.console.stack.root()
        reply = await api.call(method, path.format(id=root.id), body)
        assert reply.status == 400, reply.text
        error = reply.json()["error"]
        assert error["code"] == "INVALID_ARGUMENT"
        assert error["message"].startswith(f"{field}: is not valid Unicode text")
        nodes = (await api.ok("GET", "/api/tree"))["nodes"]
        assert [node["id"] for node in nodes] == [root.id]


class TestDigestsAndTree:
    async def test_digests_page_with_tokens_and_filter(self, api: Api) -> None:
        """page_size 2 over three roots: 2, then 1; status=archived lists the archived one."""
        stack = api.console.stack
        ids = [(await stack.root(label=f"d{n}")).id for n in range(3)]
        await api.ok("POST", f"/api/sessions/{ids[1]}/archive", {})
        first = await api.ok("GET", "/api/digests?page_size=2")
        assert len(first["digests"]) == 2 and first["next_page_token"]
        second = await api.ok(
            "GET", f"/api/digests?page_size=2&page_token={first['next_page_token']}"
        )
        assert len(second["digests"]) == 1 and not second["next_page_token"]
        archived = await api.ok("GET", "/api/digests?status=archived")
        assert [d["id"] for d in archived["digests"]] == [ids[1]]

    async def test_an_unknown_status_is_refused(self, api: Api) -> None:
        """status must be active, archived or empty."""
        reply = await api.call("GET", "/api/digests?status=gone")
        assert reply.status == 400 and reply.json()["error"]["message"].startswith("status:")

    async def test_tree_create_root_and_delete(self, api: Api) -> None:
        """A root made through the API shows in the tree; deleting it answers its ids."""
        root = await api.ok("POST", "/api/roots", {"label": "Made", "system_prompt": "Hi."})
        nodes = (await api.ok("GET", "/api/tree"))["nodes"]
        assert [(n["id"], n["label"], n["turn_count"]) for n in nodes] == [(root["id"], "Made", 0)]
        deleted = await api.ok("DELETE", f"/api/sessions/{root['id']}")
        assert deleted == {"deleted_ids": [root["id"]]}
        assert (await api.ok("GET", "/api/tree"))["nodes"] == []

    async def test_profiles_and_config(self, api: Api) -> None:
        """The profiles of the gateway's file, and a config saying live updates run."""
        names = [p["name"] for p in (await api.ok("GET", "/api/profiles"))["profiles"]]
        assert names[:2] == ["research", "preset"]
        config = await api.ok("GET", "/api/config")
        assert config["mode"] == "local" and config["space_id"] == api.console.stack.space.sid
        assert config["live"] is True


class TestNodes:
    async def test_nodes_come_in_the_order_asked_and_gone_ones_are_named(self, api: Api) -> None:
        """?id=...: each session as a forest node (as GetTree has it); deleted ones are missing."""
        stack = api.console.stack
        root = await stack.root(label="Top")
        child = await stack.fork(root.id, "Below")
        gone = await stack.fork(root.id, "Gone")
        await api.ok("DELETE", f"/api/sessions/{gone.id}")
        reply = await api.ok("GET", f"/api/nodes?id={child.id}&id={gone.id}&id={root.id}")
        assert [(n["id"], n["label"], n["depth"]) for n in reply["nodes"]] == [
            (child.id, "Below", 1),
            (root.id, "Top", 0),
        ]
        tree = {n["id"]: n for n in (await api.ok("GET", "/api/tree"))["nodes"]}
        assert reply["nodes"] == [tree[child.id], tree[root.id]]
        assert reply["missing"] == [gone.id]

    @pytest.mark.parametrize(
        "query",
        [
            pytest.param("", id="none"),
            pytest.param("id=not-a-uuid", id="not-a-uuid"),
            pytest.param("&".join(["id=00000000-0000-4000-8000-000000000000"] * 101), id="101"),
        ],
    )
    async def test_bad_ids_are_refused_naming_the_parameter(self, api: Api, query: str) -> None:
        """No id, a malformed one or more than 100: 400 naming `id`."""
        reply = await api.call("GET", f"/api/nodes?{query}")
        assert reply.status == 400 and reply.json()["error"]["message"].startswith("id:")


LEASE = "SELECT turn_token FROM sessions WHERE space_id = $1 AND id = $2"


async def reply_begun(api: Api, session_id: str, content: str) -> asyncio.StreamWriter:
    """A Send whose reply has begun (REPLY_HEAD read) on a raw connection, for the test to
    close as a page going away (or a Stop aborting its fetch) does."""
    port = api.console.port
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = json.dumps({"content": content}).encode()
    writer.write(
        (
            f"POST /api/sessions/{session_id}/send HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Cookie: {api.signed['Cookie']}\r\nX-Stello-Page: {api.signed['X-Stello-Page']}\r\n"
            f"Origin: http://127.0.0.1:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        + body
    )
    seen = b""
    while REPLY_HEAD.encode() not in seen:
        seen += await asyncio.wait_for(reader.read(1024), 20)
    return writer


async def lease_of(pool: asyncpg.Pool, console: ConsoleStack, session_id: str) -> Any:
    """The session's turn lease token (None: no turn holds it)."""
    space = console.stack.space.id
    return await pool.fetchval(LEASE, space, uuid.UUID(session_id))


class TestStreamEnds:
    async def test_leaving_mid_reply_cancels_the_turn_and_stores_nothing(self, api: Api) -> None:
        """The page goes away after the first delta: the turn is cancelled, nothing is stored,
        and the session takes the next turn at once (the lease was released)."""
        console = api.console
        root = await console.stack.root()
        console.provider.release.clear()
        writer = await reply_begun(api, root.id, "going")
        writer.close()
        await writer.wait_closed()
        chain = console.stack.gateway.app.chain
        assert chain is not None and chain.in_flight  # the Send, held in the model
        await wait_for(lambda: not chain.in_flight, within_s=10)  # the console cancelled it
        console.provider.release.set()
        assert await console.stack.records(root.id) == []
        reply = await api.call("POST", f"/api/sessions/{root.id}/send", {"content": "again"})
        assert [name for name, _ in reply.events()][-1] == "done"
        assert [r.content for r in await console.stack.records(root.id)] == [
            "again",
            f"{REPLY_HEAD}reply to: again",
        ]

    async def test_a_disconnect_cancels_the_upstream_send_within_a_second(
        self, api: Api, pool: asyncpg.Pool
    ) -> None:
        """A client that disconnects mid-reply (a Stop) has the console cancel its SendStream:
        within a second the gateway closes the model's stream (held, it would never end by
        itself), the session's lease is free (not left to its TTL) and nothing is stored."""
        console = api.console
        root = await console.stack.root()
        console.provider.release.clear()
        writer = await reply_begun(api, root.id, "runaway")
        assert await lease_of(pool, console, root.id) is not None
        writer.close()
        await writer.wait_closed()
        await asyncio.wait_for(console.provider.cut.wait(), 1)
        for _ in range(100):  # the release is one storage call after the cut
            if await lease_of(pool, console, root.id) is None:
                break
            await asyncio.sleep(0.01)
        assert await lease_of(pool, console, root.id) is None
        assert await console.stack.records(root.id) == []


def dead_address() -> str:
    """A loopback address where nothing listens."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


class TestGatewayDown:
    async def test_an_unreachable_gateway_is_unavailable_with_a_hint(
        self, space: TestSpace, caplog: pytest.LogCaptureFixture
    ) -> None:
        """No gateway at the address: 503 UNAVAILABLE saying to check `stello up` (the local
        console's user started it), without grpc core's words; those go to the log."""
        dead = dead_address()
        options = ConsoleOptions(gateway=dead, port=0, caller=Caller(space.key, space.sid))
        async with running_console(options) as console:
            assert console.launch is not None
            sign_in = await fetch(console.port, f"/?token={console.launch.token}")
            reply = await fetch(console.port, "/api/tree", headers=signed_headers(sign_in))
        assert reply.status == 503
        error = reply.json()["error"]
        assert error == {
            "code": "UNAVAILABLE",
            "message": "the gateway is not answering: is `stello up` still running?",
            "reason": None,
        }
        assert dead in caplog.text

    async def test_a_deployed_console_says_one_plain_sentence(
        self, space: TestSpace, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A deployed console (key mode) with its gateway down: the browser user reads that
        the gateway is not answering, neither the address, grpc core's words nor CLI advice."""
        dead = dead_address()
        async with running_console(ConsoleOptions(gateway=dead, port=0)) as console:
            reply = await fetch(
                console.port,
                "/api/tree",
                headers={"Authorization": f"Bearer {space.key}", "X-Stello-Space": space.sid},
            )
        assert reply.status == 503
        error = reply.json()["error"]
        assert error["message"] == "the gateway is not answering; try again shortly"
        assert dead in caplog.text


class TestPageSizes:
    """The page sizes of the console's reads."""

    @pytest.mark.parametrize(
        ("path", "size", "message"),
        [
            pytest.param("/api/search?q=x&", 101, "must be within 1..100, got 101", id="search"),
            pytest.param("/api/search?q=x&", 0, "must be within 1..100, got 0", id="search-0"),
            pytest.param("/api/digests?", 1001, "must be within 1..1000, got 1001", id="digests"),
        ],
    )
    async def test_a_page_size_out_of_range_names_the_range_and_the_value(
        self, api: Api, path: str, size: int, message: str
    ) -> None:
        """A page size out of range is refused in the services' words: the range and the
        value sent ("must be within 0..100, got 101" from SearchRecords)."""
        reply = await api.call("GET", f"{path}page_size={size}")
        assert reply.status == 400
        assert reply.json()["error"]["message"] == f"page_size: {message}"

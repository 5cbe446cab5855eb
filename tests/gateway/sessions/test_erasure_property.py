"""After any deletes in a random tree, no table holds text only a deleted session showed.

Random trees on the real services: roots, forks (INHERIT or NONE, under any live
session, each with a request_id), Sends with request_ids, insights and memories, then
deletes of random subtrees. Every text written is unique to the session it was written
to. After each delete, every text of a deleted session that no live session still
shows (a surviving INHERIT fork keeps showing the records it inherited, and a fork
keeps the system prompt it copied: DESIGN §4.4) must be gone from every table of the
schema, searched through the catalogue, so a table added later is searched too
(DESIGN §4.8): records, slots, remembered replies, events, anything.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from tests.gateway.conftest import Stack
from tests.gateway.sessions.test_erased_replies import delete_session
from tests.gateway.turns_support import send
from tests.support.erasure import tables_holding
from tests.support.fixtures import database_fixtures
from tests.tree.conftest import erased

pytestmark = pytest.mark.sql

# A database of this module's own: the search at the end of each example reads every row
# of the database, which then holds this test's rows only, not every row the run wrote.
_direct_database_url, _database_url, _settings, _pool, _keys = database_fixtures("module")


@dataclass
class Tree:
    """The live sessions, their parents, and the texts written to each."""

    parent: dict[str, str | None] = field(default_factory=dict)
    texts: dict[str, set[str]] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)
    serial: int = 0

    def text(self, session: str | None = None) -> str:
        """A new unique text (recorded as `session`'s when given)."""
        self.serial += 1
        value = f"t{self.serial}x{uuid.uuid4().hex}"
        if session is not None:
            self.texts.setdefault(session, set()).add(value)
        return value

    def add(self, session: str, parent: str | None, *texts: str) -> None:
        self.parent[session] = parent
        self.texts.setdefault(session, set()).update(texts)

    def subtree(self, session: str) -> set[str]:
        doomed = {session}
        grew = True
        while grew:
            more = {s for s, p in self.parent.items() if p in doomed} - doomed
            grew = bool(more)
            doomed |= more
        return doomed


async def shown(stack: Stack, session: str) -> str:
    """Everything a live session shows through the gateway, as text."""
    view = await stack.view(session)
    return str(view) + "".join(str(r) for r in await stack.records(session))


Step = tuple[str, int, int]
STEPS = st.lists(
    st.tuples(
        st.sampled_from(["fork", "fork", "send", "send", "slots", "delete"]),
        st.integers(0, 1000),
        st.integers(0, 1000),
    ),
    min_size=5,
    max_size=12,
)


async def new_root(stack: Stack, tree: Tree) -> None:
    """A root with a label, a system prompt and one turn, each text its own."""
    label, prompt = tree.text(), tree.text()
    root = await stack.root(label=label, system_prompt=prompt, request_id=tree.text())
    tree.add(root.id, None, label, prompt)
    await send(stack, root.id, tree.text(root.id), request_id=tree.text())


async def run_step(stack: Stack, tree: Tree, step: Step) -> None:
    kind, pick, other = step
    if not tree.parent:
        await new_root(stack, tree)
    live = sorted(tree.parent)
    session = live[pick % len(live)]
    if kind == "fork":
        under = live[other % len(live)]
        label, opening = tree.text(), tree.text()
        inherit = other % 2 == 0
        context = common_pb2.FORK_CONTEXT_INHERIT if inherit else common_pb2.FORK_CONTEXT_NONE
        fields = {} if inherit else {"system_prompt": tree.text()}
        child = await stack.fork(
            session,
            label=label,
            prompt=opening,
            context=context,
            topology_parent_id=under,
            request_id=tree.text(),
            **fields,
        )
        tree.add(child.id, under, label, opening, *fields.values())
    elif kind == "send":
        await send(stack, session, tree.text(session), request_id=tree.text())
    elif kind == "slots":
        sid = stack.space.sid
        await stack.gw.PutInsight(
            agent_pb2.PutInsightRequest(
                space_id=sid, session_id=session, content=tree.text(session)
            )
        )
        await stack.gw.PutMemory(
            agent_pb2.PutMemoryRequest(space_id=sid, session_id=session, content=tree.text(session))
        )
    else:
        await delete_session(stack, session)
        doomed = tree.subtree(session)
        for gone in doomed:
            del tree.parent[gone]
        tree.gone |= doomed


async def check(stack: Stack, tree: Tree, pool: asyncpg.Pool, *, everywhere: bool) -> None:
    """No table holds a text of a deleted session that no live session shows: in the
    space's rows, or (`everywhere`) in every row of the run's database (a scan of each
    table, which holds every earlier test's rows by then: once per example)."""
    written = {t for s in tree.gone for t in tree.texts.get(s, ())}
    if not written:
        return
    views = "".join([await shown(stack, s) for s in sorted(tree.parent)])
    gone = {t for t in written if t not in views}
    await erased(pool)
    async with pool.acquire() as con:
        space = None if everywhere else stack.space.id
        assert await tables_holding(con, gone, space) == {}


@pytest.mark.slow
@pytest.mark.model
@settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=STEPS)
async def test_nothing_of_a_deleted_session_is_left(
    steps: list[Step], stack: Stack, pool: asyncpg.Pool
) -> None:
    """After every delete, no row of any table holds text only deleted sessions showed."""
    tree = Tree()
    for _ in range(2):
        await new_root(stack, tree)
    for step in steps:
        await run_step(stack, tree, step)
        if step[0] == "delete":
            await check(stack, tree, pool, everywhere=False)
    for top in [s for s, p in tree.parent.items() if p is None]:
        await delete_session(stack, top)
        doomed = tree.subtree(top)
        for gone in doomed:
            del tree.parent[gone]
        tree.gone |= doomed
    await check(stack, tree, pool, everywhere=True)

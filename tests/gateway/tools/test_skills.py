"""Skills (STELLO-SPEC §4.10, §6.9 item 9; DESIGN §4.5): the registry and activate_skill.

The allow-list is the session's frozen config as CreateRoot and Fork compose
it: unset = every configured skill, [] = none (and no tool), a list = those.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import pytest

from agent_gateway.config import GatewaySettings
from agent_gateway.files import GatewayFiles
from agent_gateway.forks.profiles import ProfilesFileError
from agent_gateway.llm import ToolCallSpec
from agent_gateway.tools.base import ACTIVATE_SKILL
from agent_gateway.tools.skills import SkillsFileError, parse_skills
from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.common.v1 import common_pb2
from tests.gateway.conftest import Stack, StackMaker, new_id, row_counts, rpc_error
from tests.gateway.turns_support import SpyProvider, answer, roles, send, tool_call
from tests.support.fixtures import TestSpace

SKILLS_TOML = """
[[skills]]
name = "tides"
description = "Tide tables and how to read them."
content = "Read the table from the top; times are local."

[[skills]]
name = "knots"
description = "Sailing knots."
content = "Bowline: the rabbit comes out of the hole."

[[skills]]
name = "charts"
description = "Nautical charts."
content = "North is up."
"""
ALL = ["tides", "knots", "charts"]
README = Path(__file__).resolve().parents[3] / "README.md"
SKILLS_MARKER = "<!-- skills example: the file tests/cli/suite.py serves -->"


@pytest.fixture(name="skills_file")
def _skills_file(tmp_path: Path) -> Path:
    path = tmp_path / "skills.toml"
    path.write_text(SKILLS_TOML, encoding="utf-8")
    return path


def skill_tool(call: Any) -> Any | None:
    """The activate_skill spec a model call was offered, or None."""
    return next((t for t in call.tools or () if t.name == ACTIVATE_SKILL), None)


def enum(call: Any) -> list[str] | None:
    """The enum of the offered activate_skill's `name`, or None when not offered."""
    tool = skill_tool(call)
    return None if tool is None else list(tool.parameters["properties"]["name"]["enum"])


def skills(names: list[str] | None) -> dict[str, Any]:
    """The request field for an allow-list (None = leave it unset)."""
    return {} if names is None else {"skills": common_pb2.SkillList(names=names)}


class TestRegistryFile:
    def test_the_file_lists_skills_in_order(self) -> None:
        """A valid file gives its skills in file order, each with its three fields."""
        registry = parse_skills(SKILLS_TOML)
        assert [s.name for s in registry] == ALL
        assert registry.get("knots") is not None
        assert registry.visible(None) == list(registry)
        assert [s.name for s in registry.visible(["charts", "tides", "missing"])] == [
            "tides",
            "charts",
        ]
        assert registry.visible([]) == []

    @pytest.mark.parametrize(
        ("text", "problem"),
        [
            pytest.param(
                SKILLS_TOML + SKILLS_TOML,
                'line 18: skill "tides", field name: the name is defined twice (first on line 2): '
                "rename or remove one",
                id="duplicate",
            ),
            pytest.param(
                '[[skills]]\nname = "two words"\ndescription = "d"\ncontent = "c"\n',
                'line 2: skill "two words", field name: must be 1..64 characters of letters, '
                "digits, _ . : or -",
                id="bad-name",
            ),
            pytest.param(
                '[[skills]]\nname = "a"\ndescription = "one\\ntwo"\ncontent = "c"\n',
                'line 3: skill "a", field description: must be one line (the tool\'s description '
                "lists one per skill)",
                id="two-line-description",
            ),
            pytest.param(
                '[[skills]]\nname = "a"\ndescription = ""\ncontent = "c"\n',
                'line 3: skill "a", field description: must not be empty',
                id="empty-description",
            ),
            pytest.param(
                '[[skills]]\nname = "a"\ndescription = "d"\n',
                'line 1: skill "a", field content: is required: add it',
                id="no-content",
            ),
            pytest.param(
                '[[skills]]\nname = "a"\ndescription = "d"\ncontent = "c"\nextra = 1\n',
                'line 5: skill "a", field extra: is not a known field (known: name, description, '
                "content): remove it or correct its spelling",
                id="unknown-key",
            ),
            pytest.param(
                "[[skills]\n",
                "line 1, column 9: not valid TOML: Expected ']]' at the end of an array "
                "declaration: fix the syntax there",
                id="toml",
            ),
        ],
    )
    def test_a_bad_file_is_refused_naming_the_problem(self, text: str, problem: str) -> None:
        """Duplicates, bad names, multi-line descriptions, missing or unknown keys are refused,
        naming the file, the 1-based line, the skill by its name, the field and what to do."""
        with pytest.raises(SkillsFileError) as raised:
            parse_skills(text, "skills.toml")
        assert str(raised.value) == f"skills.toml {problem}"


@pytest.mark.sql
class TestOffered:
    async def test_no_configured_skill_offers_no_tool(self, make_stack: StackMaker) -> None:
        """Without a skills file, activate_skill is never offered."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        await send(stack, root.id, "hi")
        assert skill_tool(spy.turns[0]) is None

    @pytest.mark.parametrize(
        ("allowed", "expected"),
        [
            pytest.param(None, ALL, id="unset-all"),
            pytest.param([], None, id="empty-none"),
            pytest.param(["charts", "tides"], ["tides", "charts"], id="list-those"),
        ],
    )
    async def test_create_root_allow_lists(
        self,
        make_stack: StackMaker,
        skills_file: Path,
        allowed: list[str] | None,
        expected: list[str] | None,
    ) -> None:
        """A root's allow-list decides the tool and its enum (in registry order)."""
        spy = SpyProvider()
        stack = await make_stack(spy, skills_file=skills_file)
        root = await stack.root(**skills(allowed))
        await send(stack, root.id, "hi")
        assert enum(spy.turns[0]) == expected

    @pytest.mark.parametrize("rpc", ["CreateRoot", "Fork"])
    async def test_an_unconfigured_name_is_refused(
        self, make_stack: StackMaker, skills_file: Path, pool: asyncpg.Pool, rpc: str
    ) -> None:
        """An allow-list naming a skill the gateway does not have is INVALID_ARGUMENT naming
        the name's field and the configured skills, and nothing is made (it was stored, and
        the session matched no skill without a word)."""
        stack = await make_stack(SpyProvider(), skills_file=skills_file)
        root = await stack.root()
        before = await row_counts(pool, stack.space)
        allowed = skills(["charts", "tidez"])
        if rpc == "CreateRoot":
            call = stack.gw.CreateRoot(
                agent_pb2.CreateRootRequest(space_id=stack.space.sid, **allowed)
            )
        else:
            call = stack.gw.Fork(
                agent_pb2.ForkRequest(
                    space_id=stack.space.sid, source_session_id=root.id, label="f", **allowed
                )
            )
        error = await rpc_error(call)
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error.details() == (
            "skills.names[1]: names no configured skill (tides, knots, charts), got 'tidez'"
        )
        assert await row_counts(pool, stack.space) == before

    async def test_a_name_no_longer_configured_is_ignored(
        self, make_stack: StackMaker, skills_file: Path, tmp_path: Path
    ) -> None:
        """A frozen allow-list naming a skill later removed from the file offers the rest,
        and nothing once none is left."""
        stack = await make_stack(SpyProvider(), skills_file=skills_file)
        both = await stack.root(**skills(["charts", "tides"]))
        tides = await stack.root(**skills(["tides"]))
        fewer = tmp_path / "fewer.toml"
        fewer.write_text(SKILLS_TOML.replace('name = "tides"', 'name = "tables"'), "utf-8")
        spy = SpyProvider()
        later = await make_stack(spy, skills_file=fewer)
        await send(later, both.id, "hi")
        await send(later, tides.id, "hi")
        assert [enum(call) for call in spy.turns] == [["charts"], None]

    async def test_the_description_lists_the_allowed_skills(
        self, make_stack: StackMaker, skills_file: Path
    ) -> None:
        """The tool's description carries one `name: description` line per allowed skill."""
        spy = SpyProvider()
        stack = await make_stack(spy, skills_file=skills_file)
        root = await stack.root(**skills(["knots"]))
        await send(stack, root.id, "hi")
        tool = skill_tool(spy.turns[0])
        assert tool is not None
        assert tool.description.splitlines()[1:] == ["knots: Sailing knots."]
        assert tool.parameters["required"] == ["name"]

    @pytest.mark.parametrize(
        ("root_list", "fork_list", "expected"),
        [
            pytest.param(None, None, ALL, id="unset-unset"),
            pytest.param(["knots"], None, ["knots"], id="inherited"),
            pytest.param(["knots"], [], None, id="fork-none"),
            pytest.param([], ["tides", "charts"], ["tides", "charts"], id="fork-list"),
        ],
    )
    async def test_fork_allow_lists(
        self,
        make_stack: StackMaker,
        skills_file: Path,
        root_list: list[str] | None,
        fork_list: list[str] | None,
        expected: list[str] | None,
    ) -> None:
        """A fork's allow-list is its request's when set, else the source's (composition)."""
        spy = SpyProvider()
        stack = await make_stack(spy, skills_file=skills_file)
        root = await stack.root(**skills(root_list))
        child = await stack.fork(root.id, **skills(fork_list))
        await send(stack, child.id, "hi")
        assert enum(spy.turns[0]) == expected

    async def test_a_session_with_none_is_never_offered_the_tool(
        self, make_stack: StackMaker, skills_file: Path
    ) -> None:
        """With [] the tool is offered in no round of a turn, its tool rounds included."""
        spy = SpyProvider().then(answer("", tool_call("stello_create_session", "c", label="k")))
        stack = await make_stack(spy, skills_file=skills_file)
        root = await stack.root(**skills([]))
        await send(stack, root.id, "hi")
        assert len(spy.turns) == 2
        assert all(skill_tool(call) is None for call in spy.turns)


@pytest.mark.sql
class TestActivate:
    async def activated(
        self, stack: Stack, spy: SpyProvider, session_id: str, name: Any
    ) -> common_pb2.Record:
        """A turn whose model activates `name`; the tool record."""
        call = ToolCallSpec("c1", ACTIVATE_SKILL, {"name": name})
        spy.then(answer("", call), answer("done"))
        reply = await send(stack, session_id, "go")
        assert roles(reply.records) == ["user", "assistant", "tool", "assistant"]
        record: common_pb2.Record = reply.records[2]
        return record

    async def test_an_allowed_skill_answers_its_content(
        self, make_stack: StackMaker, skills_file: Path
    ) -> None:
        """activate_skill of an allowed skill answers {content} to the model."""
        spy = SpyProvider()
        stack = await make_stack(spy, skills_file=skills_file)
        root = await stack.root()
        record = await self.activated(stack, spy, root.id, "knots")
        assert json.loads(record.content) == {
            "content": "Bowline: the rabbit comes out of the hole."
        }
        assert not record.metadata.fields["is_error"].bool_value
        assert spy.turns[-1].messages[-1].content == record.content

    @pytest.mark.parametrize(
        ("name", "message"),
        [
            pytest.param("sails", 'Skill "sails" is not available', id="unknown"),
            pytest.param("tides", 'Skill "tides" is not available', id="disallowed"),
            pytest.param(7, "name is required", id="not-text"),
        ],
    )
    async def test_unknown_and_disallowed_names_are_error_results(
        self, make_stack: StackMaker, skills_file: Path, name: Any, message: str
    ) -> None:
        """A skill outside the session's view is an error result; the turn completes."""
        spy = SpyProvider()
        stack = await make_stack(spy, skills_file=skills_file)
        root = await stack.root(**skills(["knots"]))
        record = await self.activated(stack, spy, root.id, name)
        assert record.metadata.fields["is_error"].bool_value
        assert message in record.content
        assert "knots" in record.content  # what is available

    async def test_a_session_with_none_answers_unknown_tool(
        self, make_stack: StackMaker, skills_file: Path
    ) -> None:
        """A model that calls activate_skill anyway in a session with [] gets 'Unknown tool'."""
        spy = SpyProvider()
        stack = await make_stack(spy, skills_file=skills_file)
        root = await stack.root(**skills([]))
        record = await self.activated(stack, spy, root.id, "knots")
        assert record.content == f"Unknown tool: {ACTIVATE_SKILL}"


@pytest.mark.sql
class TestListSkills:
    async def test_every_skill_or_one_session_s(
        self, make_stack: StackMaker, skills_file: Path
    ) -> None:
        """ListSkills answers every skill in file order, or those a session allows."""
        stack = await make_stack(SpyProvider(), skills_file=skills_file)
        sid = stack.space.sid
        every = await stack.gw.ListSkills(agent_pb2.ListSkillsRequest(space_id=sid))
        assert [(s.name, s.description) for s in every.skills][:1] == [
            ("tides", "Tide tables and how to read them.")
        ]
        assert [s.name for s in every.skills] == ALL
        for allowed, expected in ((None, ALL), (["charts"], ["charts"]), ([], [])):
            root = await stack.root(**skills(allowed))
            reply = await stack.gw.ListSkills(
                agent_pb2.ListSkillsRequest(space_id=sid, session_id=root.id)
            )
            assert [s.name for s in reply.skills] == expected

    @pytest.mark.parametrize("configured", [True, False], ids=["skills-file", "no-skills-file"])
    async def test_an_unknown_or_foreign_session_is_not_found(
        self,
        make_stack: StackMaker,
        skills_file: Path,
        other_space: TestSpace,
        configured: bool,
    ) -> None:
        """ListSkills for a session that is not in the space (unknown, or another space's) is
        NOT_FOUND, whether or not a skills file is configured."""
        overrides = {"skills_file": skills_file} if configured else {}
        stack = await make_stack(SpyProvider(), **overrides)
        async with stack.gateway.channel(other_space.key) as channel:
            other = agent_pb2_grpc.AgentGatewayStub(channel)
            foreign = await other.CreateRoot(agent_pb2.CreateRootRequest(space_id=other_space.sid))
        for session_id in (new_id(), foreign.session.id):
            error = await rpc_error(
                stack.gw.ListSkills(
                    agent_pb2.ListSkillsRequest(space_id=stack.space.sid, session_id=session_id)
                )
            )
            assert error.code() is grpc.StatusCode.NOT_FOUND


def test_the_readme_example_is_a_valid_skills_file() -> None:
    """The README's example skills file parses, its skills in order."""
    text = README.read_text(encoding="utf-8").partition(SKILLS_MARKER)[2]
    found = re.search(r"```toml\n(.*?)```", text, flags=re.DOTALL)
    assert found, "README.md lost its skills example"
    registry = parse_skills(found.group(1), "README.md")
    assert [s.name for s in registry] == ["tides", "knots"]


@pytest.mark.subprocess
async def test_the_gateway_refuses_to_start_on_a_bad_skills_file(tmp_path: Path) -> None:
    """`python -m agent_gateway` exits 1 naming the file and problem, before any database."""
    path = tmp_path / "skills.toml"
    path.write_text(SKILLS_TOML + SKILLS_TOML, encoding="utf-8")
    env = {
        **os.environ,
        "STELLO_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none",
        "STELLO_GATEWAY_PORT": "0",
        "STELLO_GATEWAY_SKILLS_FILE": str(path),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agent_gateway",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
    errors = stderr.decode()
    assert process.returncode == 1, errors
    assert errors == (
        f'agent_gateway: {path} line 18: skill "tides", field name: the name is defined twice '
        "(first on line 2): rename or remove one\n"
    )
    assert "Traceback" not in errors


class TestNamesInTheConfiguration:
    """A profile or STELLO_GATEWAY_DEFAULT_SKILLS naming a skill the skills file does not
    define stops the gateway at start (GatewayFiles.read, what `python -m agent_gateway`
    and `stello up` read), naming where the name is and the skills there are."""

    @staticmethod
    def files(tmp_path: Path, profile_skills: str, **fields: Any) -> GatewayFiles:
        skills, profiles = tmp_path / "skills.toml", tmp_path / "profiles.toml"
        skills.write_text(SKILLS_TOML, encoding="utf-8")
        profiles.write_text(
            f'# profiles\n[[profiles]]\nname = "sailor"\nskills = {profile_skills}\n',
            encoding="utf-8",
        )
        config = GatewaySettings(skills_file=skills, profiles_file=profiles, **fields)
        return GatewayFiles.read(config)

    def test_a_profile_naming_an_unknown_skill(self, tmp_path: Path) -> None:
        with pytest.raises(ProfilesFileError) as raised:
            self.files(tmp_path, '["tides", "tide"]')
        assert str(raised.value) == (
            f'{tmp_path / "profiles.toml"} line 4: profile "sailor", field skills: names no '
            "configured skill (tides, knots, charts), got 'tide': define it in "
            "STELLO_GATEWAY_SKILLS_FILE or take it out"
        )

    def test_default_skills_naming_an_unknown_skill(self, tmp_path: Path) -> None:
        with pytest.raises(SkillsFileError, match=r"^STELLO_GATEWAY_DEFAULT_SKILLS names no "):
            self.files(tmp_path, "[]", default_skills=["knots", "rope"])

    def test_configured_names_start(self, tmp_path: Path) -> None:
        files = self.files(tmp_path, '["tides"]', default_skills=["knots"])
        assert [p.skills for p in files.profiles] == [("tides",)]

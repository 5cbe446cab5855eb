"""The client commands without a gateway: target resolution, errors, and tree drawing."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from stello.common.v1 import common_pb2
from stello_cli.output.format import MAX_COLUMN, digests_lines, tree_lines
from tests.cli.processes import client_env, private_env, run_cli

ACTIVE = common_pb2.SESSION_STATUS_ACTIVE
ARCHIVED = common_pb2.SESSION_STATUS_ARCHIVED
FROM_VARIABLE = (
    "the address in STELLO_GATEWAY: fix it, or unset it to use the one `stello up` saved"
)


def node(
    id_: str,
    parent: str | None,
    label: str,
    turns: int = 0,
    status: common_pb2.SessionStatus = ACTIVE,
) -> common_pb2.TreeNode:
    """A TreeNode with just what the drawing reads."""
    made = common_pb2.TreeNode(id=id_, label=label, turn_count=turns, status=status)
    if parent is not None:
        made.parent_id = parent
    return made


class TestTreeLines:
    def test_siblings_and_nesting(self) -> None:
        """Siblings get ├─/└─ and descendants of a non-last child keep the │ rail."""
        nodes = [
            node("r", None, "Root", 2),
            node("a", "r", "A", 1),
            node("a1", "a", "A1"),
            node("b", "r", "B", status=ARCHIVED),
            node("s", None, "Second root"),
        ]
        assert tree_lines(nodes) == [
            "Root         [active, 2 turns]    r",
            "├─ A         [active, 1 turn]     a",
            "│  └─ A1     [active, 0 turns]    a1",
            "└─ B         [archived, 0 turns]  b",
            "Second root  [active, 0 turns]    s",
        ]

    def test_previews_short_ids_and_the_mark(self) -> None:
        """Ids are cut to 8 digits, a preview follows when given, and the marked node gets ◀."""
        long_id = "0123456789abcdef"
        nodes = [node(long_id, None, "Root"), node("c" * 16, long_id, "Child")]
        lines = tree_lines(nodes, previews={long_id: "user: hi"}, mark="c" * 16)
        assert lines == [
            "Root      [active, 0 turns]  01234567  user: hi",
            "└─ Child  [active, 0 turns]  cccccccc  ◀",
        ]

    def test_a_label_never_drives_the_terminal(self) -> None:
        """A label holding control characters (written before labels were one line) is
        drawn with them escaped and its line breaks as spaces: an escape sequence in it
        recoloured the terminal, a line break broke the tree's rows."""
        nodes = [node("r", None, "a\x1b[31mred\nline\x9b")]
        assert tree_lines(nodes) == ["a\\x1b[31mred line\\x9b  [active, 0 turns]  r"]

    def test_wide_labels_align_by_columns(self) -> None:
        """CJK and emoji take two columns each on a terminal and combining marks none: the
        status column lines up under them (it was padded by characters, two short per CJK
        character, so every row after a Japanese label stood out of line)."""
        nodes = [
            node("r", None, "長い会話"),
            node("a", "r", "🎉 party"),
            node("b", "r", "👨\u200d👩\u200d👧 ⚠\ufe0f"),
            node("c", "r", "Cafe\u0301"),
            node("d", "r", "ＡＰＩ and ascii"),
        ]
        status = "[active, 0 turns]"
        # The label column is 19 columns wide (the last label's), then the gap of 2.
        assert tree_lines(nodes) == [
            "長い会話" + " " * 13 + f"{status}  r",
            "├─ 🎉 party" + " " * 10 + f"{status}  a",
            "├─ 👨\u200d👩\u200d👧 ⚠\ufe0f" + " " * 13 + f"{status}  b",
            "├─ Cafe\u0301" + " " * 14 + f"{status}  c",
            f"└─ ＡＰＩ and ascii  {status}  d",
        ]

    def test_deep_chain_needs_no_recursion(self) -> None:
        """A chain deeper than Python's recursion limit still draws, one line per session."""
        depth = 5000
        nodes = [node("n0", None, "n0")]
        nodes += [node(f"n{i}", f"n{i - 1}", f"n{i}") for i in range(1, depth)]
        lines = tree_lines(nodes)
        assert len(lines) == depth
        last = f"n{depth - 1}"
        assert lines[-1] == " " * 3 * (depth - 2) + f"└─ {last}  [active, 0 turns]  {last}"
        # The label column is as wide as its labels, up to a cap: the deep ones overflow.
        assert lines[0] == "n0" + " " * (MAX_COLUMN - 2) + "  [active, 0 turns]  n0"

    def test_digests_share_the_columns(self) -> None:
        """`digests` aligns its columns as `tree` does (widths from the data)."""
        found = [
            common_pb2.SessionDigest(
                id="a" * 16, label="A", status=ACTIVE, turn_count=1, memory="m"
            ),
            common_pb2.SessionDigest(id="b" * 16, label="Longer label", status=ACTIVE, insight="i"),
        ]
        assert digests_lines(found) == [
            "aaaaaaaa  A             [active, 1 turn]",
            "    memory: m",
            "bbbbbbbb  Longer label  [active, 0 turns]",
            "    insight: i",
        ]


@pytest.mark.subprocess
class TestErrors:
    def test_without_stello_up_says_what_to_do(self, home: Path) -> None:
        """No saved credentials and no flags: one line naming `stello up` and the flags, exit 1."""
        done = run_cli(private_env(home), "tree")
        assert done.returncode == 1
        assert done.stderr == (
            "stello: no gateway address: run `stello up` first, "
            "or pass --gateway / set STELLO_GATEWAY\n"
        )

    def test_a_key_with_a_line_break_is_one_line(self, home: Path) -> None:
        """A pasted key with a line break (flag or variable): one line naming --key
        (a traceback of gRPC's ExecuteBatchError before), exit 1."""
        env = private_env(home)
        env.update(STELLO_GATEWAY="127.0.0.1:1", STELLO_SPACE_ID="s")
        for flags, key in (((), "stello_\nk"), (("--key", "stello_k\n"), "")):
            env["STELLO_KEY"] = key
            done = run_cli(env, *flags, "tree")
            assert (done.returncode, done.stderr) == (
                1,
                "stello: the API key (--key or STELLO_KEY) holds a character no key has (a "
                "space, a line break or a non-ASCII character): copy it again\n",
            )

    def test_a_gateway_address_that_cannot_be_used_is_one_plain_line(self, home: Path) -> None:
        """STELLO_GATEWAY as a URL names the variable (for `stello health` too); a host that
        does not resolve is said so, not in gRPC's resolver (c-ares) words."""
        env = private_env(home)
        env.update(STELLO_KEY="stello_k", STELLO_SPACE_ID="s", STELLO_GATEWAY="http://h:1")
        said = (
            "stello: STELLO_GATEWAY: give HOST:PORT (e.g. 127.0.0.1:50063), not a URL, "
            "got 'http://h:1'\n"
        )
        for args in (("tree",), ("health",)):
            done = run_cli(env, *args)
            assert (done.returncode, done.stderr) == (1, said)
        done = run_cli(env, "--gateway", "nohost.invalid:1", "tree")
        assert (done.returncode, done.stderr) == (
            1,
            "stello: cannot resolve host 'nohost.invalid' (in the gateway's address "
            "nohost.invalid:1): check the name (the address given with --gateway)\n",
        )

    def test_a_key_longer_than_any_key_is_one_line(self, home: Path) -> None:
        """A key of 20 KB (a pasted file) is refused naming --key, before any call: sent,
        it met gRPC's metadata limit and the line advised raising STELLO_MAX_MESSAGE_BYTES."""
        env = private_env(home)
        env.update(STELLO_GATEWAY="127.0.0.1:1", STELLO_SPACE_ID="s")
        done = run_cli(env, "--key", "stello_" + "x" * 20_000, "tree")
        assert (done.returncode, done.stderr) == (
            1,
            "stello: the API key (--key or STELLO_KEY) is 20007 characters, longer than any "
            "key (Stello's keys are 63): copy it again\n",
        )

    def test_an_empty_key_gateway_or_space_is_refused(self, home: Path) -> None:
        """`--key ""` (a script's `--key "$KEY"` with KEY unset) is refused naming the flag,
        as are an empty --gateway and --space: each fell back to its variable or to what
        `stello up` saved, so the command acted with a key it was not given. A usage error
        (exit 2) as a flag's other mistakes are: it exited 1."""
        env = private_env(home)
        env.update(STELLO_GATEWAY="127.0.0.1:1", STELLO_KEY="stello_k", STELLO_SPACE_ID="s")
        for flag, variable in (
            ("--key", "STELLO_KEY"),
            ("--gateway", "STELLO_GATEWAY"),
            ("--space", "STELLO_SPACE_ID"),
        ):
            done = run_cli(env, flag, "", "tree")
            assert (done.returncode, done.stderr) == (
                2,
                f"stello tree: {flag} is empty: give one, or leave it out to use {variable} or "
                "what `stello up` saved (see `stello tree --help`)\n",
            )

    def test_a_timeout_no_call_could_meet_is_a_usage_error(self, home: Path) -> None:
        """--timeout and --stream-timeout take a finite number of seconds above 0, at most a
        year: 0, negative, inf and nan each ended the call in "Deadline Exceeded" (exit 1),
        and so did 1e10 (past gRPC's range), as "the gateway did not answer in time"."""
        env = private_env(home)
        expected = "expected a number of seconds above 0, got"
        for flags, said in [
            (("--timeout", "0", "tree"), f"stello: argument --timeout: {expected} '0' (see "),
            (("tree", "--timeout", "nan"), f"stello tree: argument --timeout: {expected} 'nan'"),
            (
                ("send", "abc", "hi", "--stream-timeout", "inf"),
                f"stello send: argument --stream-timeout: {expected} 'inf'",
            ),
            (
                ("whoami", "--timeout", "1e10"),
                "stello whoami: argument --timeout: expected at most 31,622,400 seconds (a "
                "year), got '1e10'",
            ),
        ]:
            done = run_cli(env, *flags)
            assert done.returncode == 2 and done.stderr.startswith(said), done.stderr

    def test_a_call_past_the_commands_timeout_says_how_to_give_it_more(self, home: Path) -> None:
        """A call that ran out of the command's own --timeout (a server that takes the
        connection and never answers) says so with its value and how to give it more time:
        `stello health` said only DEADLINE_EXCEEDED, `reconcile` blamed the gateway for the
        tree service, the others named --timeout without its value."""
        env = private_env(home)
        own = "this command's own deadline: give it more time with a larger --timeout"
        with socket.socket() as silent:
            silent.bind(("127.0.0.1", 0))
            silent.listen()
            address = f"127.0.0.1:{silent.getsockname()[1]}"
            tree = run_cli(
                env,
                "--gateway",
                address,
                "--key",
                "stello_k",
                "--space",
                "s",
                "tree",
                "--timeout",
                "0.5",
            )
            health = run_cli(env, "health", address, "--timeout", "0.5")
            swept = run_cli(
                env, "reconcile", "--tree", address, "--admin-key", "k", "--timeout", "0.5"
            )
        assert (tree.returncode, tree.stderr) == (
            1,
            f"stello: the gateway did not answer within --timeout 0.5 s, {own}\n",
        )
        assert (health.returncode, health.stderr) == (
            1,
            f"{address}: DEADLINE_EXCEEDED (it did not answer within --timeout 0.5 s, {own})\n",
        )
        assert (swept.returncode, swept.stderr) == (
            1,
            f"stello: the tree service did not answer within --timeout 0.5 s, {own}\n",
        )

    def test_unreachable_gateway_is_one_line(self, home: Path) -> None:
        """A gateway that does not answer: UNAVAILABLE on one line, no traceback."""
        env = private_env(home)
        env.update(STELLO_GATEWAY="127.0.0.1:1", STELLO_KEY="k", STELLO_SPACE_ID="s")
        done = run_cli(env, "digests", "--timeout", "5")
        assert done.returncode == 1
        assert done.stderr == (
            "stello: cannot reach the gateway at 127.0.0.1:1: is `stello up` running? "
            f"({FROM_VARIABLE})\n"
        )
        assert len(done.stderr.splitlines()) == 1

    def test_an_unreachable_gateway_says_where_its_address_came_from(self, home: Path) -> None:
        """A gateway address that does not resolve or does not answer says where the command
        took it from, as a refused key does (it said only the address: a STELLO_GATEWAY left
        set from another setup looked like a gateway that is down)."""
        env = private_env(home)
        env.update(STELLO_GATEWAY="nohost.invalid:1", STELLO_KEY="k", STELLO_SPACE_ID="s")
        done = run_cli(env, "tree")
        assert (done.returncode, done.stderr) == (
            1,
            "stello: cannot resolve host 'nohost.invalid' (in the gateway's address "
            f"nohost.invalid:1): check the name ({FROM_VARIABLE})\n",
        )
        done = run_cli(env, "tree", "--gateway", "127.0.0.1:1")
        assert (done.returncode, done.stderr) == (
            1,
            "stello: cannot reach the gateway at 127.0.0.1:1: is `stello up` running? "
            "(the address given with --gateway)\n",
        )
        saved = Path(env["STELLO_CONFIG_DIR"]) / "credentials.json"
        saved.parent.mkdir(parents=True)
        saved.write_text(json.dumps({"space_id": "s", "key": "k", "gateway": "127.0.0.1:1"}))
        del env["STELLO_GATEWAY"]
        done = run_cli(env, "tree")
        assert (done.returncode, done.stderr) == (
            1,
            "stello: cannot reach the gateway at 127.0.0.1:1: is `stello up` running? "
            f"(the address `stello up` saved in {saved})\n",
        )

    def test_flags_override_saved_credentials(self, home: Path) -> None:
        """--gateway wins over the saved file (here pointing nowhere), and a bad --var is named."""
        env = private_env(home)
        saved = Path(env["STELLO_CONFIG_DIR"]) / "credentials.json"
        saved.parent.mkdir(parents=True)
        saved.write_text(json.dumps({"space_id": "s", "key": "k", "gateway": "127.0.0.1:2"}))
        done = run_cli(env, "root", "--gateway", "127.0.0.1:1", "--timeout", "5")
        assert "the gateway at 127.0.0.1:1:" in done.stderr
        bad = run_cli(env, "root", "--var", "novalue")
        assert bad.returncode == 2
        assert bad.stderr == (
            "stello root: --var wants NAME=VALUE, got 'novalue' (see `stello root --help`)\n"
        )

    def test_corrupt_credentials_file(self, home: Path) -> None:
        """A credentials file that is not ours: one line naming it."""
        env = private_env(home)
        saved = Path(env["STELLO_CONFIG_DIR"]) / "credentials.json"
        saved.parent.mkdir(parents=True)
        saved.write_text("{not json")
        done = run_cli(env, "tree")
        assert done.returncode == 1
        assert done.stderr.startswith(f"stello: {saved} is not a credentials file")

    def test_up_with_no_workers_is_a_usage_error(self, home: Path) -> None:
        """`stello up --workers 0` is a wrong command line: exit 2 and the usage hint, as
        every other refused flag of `stello up` (it exited 1), with nothing started."""
        env = private_env(home)
        done = run_cli(env, "up", "--workers", "0")
        assert (done.returncode, done.stderr) == (
            2,
            "stello up: --workers: must be at least 1, got 0 (see `stello up --help`)\n",
        )
        assert not Path(env["STELLO_DATA_DIR"]).exists()

    def test_up_names_a_bad_variable(self, home: Path) -> None:
        """`stello up` with a value a setting refuses: one line naming the variable."""
        env = private_env(home)
        env["STELLO_LLM_PROVIDER"] = "gpt"
        done = run_cli(env, "up", "--gateway-port", "0")
        assert (done.returncode, done.stderr) == (
            1,
            "stello: STELLO_LLM_PROVIDER: Input should be 'echo', 'openai' or 'anthropic'\n",
        )
        assert not Path(env["STELLO_DATA_DIR"]).exists()  # no database was started

    def test_bytes_that_are_not_utf8_name_their_flag(self, home: Path) -> None:
        """An argument or stdin holding bytes that are not UTF-8 is a usage error naming the
        flag (or stdin), before any call ("'utf-8' codec can't encode ... surrogates not
        allowed" before, naming nothing)."""
        env = private_env(home)
        bad = os.fsdecode(b"bad\xffx")  # as Python hands such bytes of argv to the program
        for args, said in [
            (("root", "--label", bad), "stello root: --label: is not valid UTF-8"),
            (("send", "abc", bad), "stello send: MESSAGE: is not valid UTF-8"),
            (("meta", "abc", f"k={bad}"), "stello meta: K=V: is not valid UTF-8"),
        ]:
            done = run_cli(env, *args)
            assert done.returncode == 2 and done.stderr.startswith(said), done.stderr
        piped = subprocess.run(
            [sys.executable, "-m", "stello_cli", "send", "abc", "-"],
            env=client_env(env),
            input=b"\xff\xfe x",
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert piped.returncode == 2
        assert piped.stderr.startswith(
            b"stello send: the text read from stdin is not valid UTF-8"
        ), piped.stderr

    def test_a_number_past_its_field_names_the_flag(self, home: Path) -> None:
        """A number no field of the API holds is a usage error naming the flag ("Value out
        of range: N" before, exit 1, naming nothing)."""
        env = private_env(home)
        for args, said in [
            (("fork", "abc", "--up-to", "99999999999999999999"), "--up-to"),
            (("tree", "--depth", "100000000000"), "--depth"),
            (("records", "abc", "--limit", "-3000000000"), "--limit"),
        ]:
            done = run_cli(env, *args)
            assert done.returncode == 2, done.stderr
            assert f"argument {said}: expected a whole number " in done.stderr, done.stderr

    def test_export_to_a_missing_folder_names_o(self, home: Path) -> None:
        """`export -o` into a folder that does not exist says so naming -o, before any
        call ("[Errno 2] No such file or directory" after fetching everything before)."""
        env = private_env(home)
        target = home / "nowhere" / "tree.json"
        done = run_cli(env, "export", "abc", "-o", str(target))
        assert (done.returncode, done.stderr) == (
            1,
            f"stello: -o {target}: no such folder to write the export in\n",
        )

    def test_up_refuses_a_port_past_the_range(self, home: Path) -> None:
        """A port outside 0-65535 is a usage error naming the flag (99999 listened on
        34463, -1 on 65535), before any database is started."""
        env = private_env(home)
        for flag, value in (("--gateway-port", "99999"), ("--console-port", "-1")):
            done = run_cli(env, "up", flag, value)
            assert done.returncode == 2
            assert done.stderr.startswith(
                f"stello up: argument {flag}: expected a port from 0 to 65535, got {value!r}"
            ), done.stderr
        assert not Path(env["STELLO_DATA_DIR"]).exists()

    def test_up_refuses_a_host_that_is_no_address(self, home: Path) -> None:
        """A --host that is no IP address and resolves to none is a usage error naming the
        flag, before any database is started (256.1.1.1 was blamed on --storage-port)."""
        env = private_env(home)
        for value in ("256.1.1.1", "no such host", ""):
            done = run_cli(env, "up", "--host", value)
            assert done.returncode == 2
            assert done.stderr.startswith(
                "stello up: argument --host: expected an IP address or a host name that "
                f"resolves, got {value!r}"
            ), done.stderr
        assert not Path(env["STELLO_DATA_DIR"]).exists()

    def test_a_bad_database_url_names_its_flag_or_variable(self, home: Path) -> None:
        """A refused --database-url is named as the flag; from the environment, the variable."""
        env = private_env(home)
        done = run_cli(env, "migrate", "--database-url", "mysql://db")
        assert done.returncode == 1
        assert done.stderr.startswith("stello: --database-url: database URL must start with ")
        env["STELLO_DATABASE_URL"] = "mysql://db"
        done = run_cli(env, "migrate")
        assert done.returncode == 1
        assert done.stderr.startswith("stello: STELLO_DATABASE_URL: database URL must start ")
        assert not Path(env["STELLO_DATA_DIR"]).exists()  # no database was started

    def test_an_unreachable_database_is_one_line_naming_it(self, home: Path) -> None:
        """`stello migrate` and `stello up` with a database nobody answers at: one line naming
        where it was sought (never the password), no traceback."""
        env = private_env(home)
        url = "postgresql://nobody:s3cret@127.0.0.1:1/stello"
        for command in ("migrate", "up"):
            done = run_cli(env, command, "--database-url", url)
            assert done.returncode == 1, done.stderr
            assert done.stderr.startswith(
                "stello: cannot connect to the database at 127.0.0.1:1/stello: "
            ), done.stderr
            assert "s3cret" not in done.stderr and "Traceback" not in done.stderr

    def test_up_checks_the_provider_before_starting(self, home: Path) -> None:
        """`stello up` with STELLO_LLM_PROVIDER=anthropic and no key stops at once, on one line."""
        env = private_env(home)
        env["STELLO_LLM_PROVIDER"] = "anthropic"
        done = run_cli(env, "up", "--gateway-port", "0")
        assert done.returncode == 1
        assert done.stderr.splitlines()[-1] == (
            "stello: STELLO_ANTHROPIC_API_KEY is not set: the anthropic provider needs an API key"
        )
        assert not Path(env["STELLO_DATA_DIR"]).exists()  # no database was started

"""The `stello` command line itself: help for everything, flags anywhere, one-line usage errors."""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from stello import __version__
from stello_cli.main import main
from stello_cli.output.style import confirm
from stello_cli.parser import (
    CALL_TIMEOUT_S,
    HEALTH_TIMEOUT_S,
    SESSION_HELP,
    build_parser,
    call_timeout,
    command_names,
    text_argument,
)
from tests.cli.processes import private_env, run_cli

BAD = os.fsdecode(b"bad\xffx")
"""A value holding a byte that is not UTF-8, as Python hands such bytes of argv over."""


def leaves(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """Every (sub)command parser that runs something."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield parser
    for action in subs:
        for child in action.choices.values():
            yield from leaves(child)


def every_parser(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """The parser and every (sub)command parser under it, groups included."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from every_parser(child)


def usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run `stello ARGV` here, which must be a usage error the parser finds (exit 2, before
    any event loop runs); its one line of stderr."""
    with pytest.raises(SystemExit) as caught:
        main(list(argv))
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    return err


class TestHelp:
    def test_every_command_and_argument_is_explained(self) -> None:
        """Each subcommand has a description and every one of its arguments a help text."""
        parser = build_parser()
        found = list(leaves(parser))
        names = {p.prog.removeprefix("stello ") for p in found}
        assert {"up", "migrate", "show", "export", "import", "keys create", "chat"} <= names
        for leaf in found:
            assert leaf.description, leaf.prog
            for action in leaf._actions:
                if isinstance(action, argparse._HelpAction):
                    continue
                assert action.help, f"{leaf.prog} {action.option_strings or action.dest}"

    def test_help_fits_80_columns(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Every command's --help fits a terminal 80 columns wide: argparse wraps the options,
        the descriptions are kept as written (RawDescriptionHelpFormatter), so they are
        wrapped by hand."""
        monkeypatch.setenv("COLUMNS", "80")
        for command in every_parser(build_parser()):
            wide = [line for line in command.format_help().splitlines() if len(line) > 80]
            assert wide == [], command.prog

    def test_up_names_its_directories(self) -> None:
        """`stello up --help` says STELLO_DATA_DIR and STELLO_CONFIG_DIR choose its data and
        credentials directories (no flag does, and the help named neither)."""
        up = next(p for p in leaves(build_parser()) if p.prog == "stello up")
        assert "STELLO_DATA_DIR" in up.format_help() and "STELLO_CONFIG_DIR" in up.format_help()

    def test_session_is_explained(self) -> None:
        """SESSION says it takes an id or its first digits."""
        parser = build_parser()
        show = next(p for p in leaves(parser) if p.prog == "stello show")
        [session] = [a for a in show._actions if a.dest == "session"]
        assert session.help == SESSION_HELP
        assert "first digits" in SESSION_HELP

    def test_version(self, capsys: pytest.CaptureFixture[str]) -> None:
        """--version prints the version."""
        with pytest.raises(SystemExit) as caught:
            main(["--version"])
        assert caught.value.code == 0
        assert capsys.readouterr().out == f"stello {__version__}\n"


class TestGlobalFlags:
    @pytest.mark.parametrize(
        "argv",
        [
            pytest.param(["--json", "--gateway", "g:1", "--space", "s", "tree"], id="before"),
            pytest.param(["tree", "--json", "--gateway", "g:1", "--space", "s"], id="after"),
            pytest.param(
                ["--gateway", "x:1", "tree", "--gateway", "g:1", "--json", "--space", "s"],
                id="after-wins",
            ),
        ],
    )
    def test_before_or_after_the_subcommand(self, argv: list[str]) -> None:
        """Connection flags and --json work on either side of the subcommand."""
        args = build_parser().parse_args(argv)
        assert (args.json, args.gateway, args.space, call_timeout(args)) == (True, "g:1", "s", 30)

    @pytest.mark.parametrize(
        ("argv", "wait"),
        [
            pytest.param(["health"], HEALTH_TIMEOUT_S, id="its-own-default"),
            pytest.param(["--timeout", "10", "health"], 10.0, id="before"),
            pytest.param(["health", "--timeout", "10"], 10.0, id="after"),
            pytest.param(["--timeout", "7", "health", "--timeout", "10"], 10.0, id="after-wins"),
            pytest.param(["--timeout", "10", "tree"], 10.0, id="a-client-command"),
        ],
    )
    def test_the_timeout_on_either_side(self, argv: list[str], wait: float) -> None:
        """`stello --timeout 10 health` waits 10 s: on main health's own default (3 s) reset
        the flag given before the command."""
        args = build_parser().parse_args(argv)
        default = HEALTH_TIMEOUT_S if args.command == "health" else CALL_TIMEOUT_S
        assert call_timeout(args, default) == wait

    @pytest.mark.parametrize(
        "argv",
        [
            pytest.param(["--gateway", "g:1", "health"], id="before"),
            pytest.param(["health", "--gateway", "g:1"], id="after"),
            pytest.param(["--gateway", "x:1", "health", "--gateway", "g:1"], id="after-wins"),
        ],
    )
    def test_health_takes_the_gateway_on_either_side(self, argv: list[str]) -> None:
        """`stello health --gateway HOST:PORT` is `stello --gateway HOST:PORT health` (on main
        the first was a usage error), and the address there is still checked."""
        args = build_parser().parse_args(argv)
        assert (args.gateway, args.address) == ("g:1", None)

    def test_health_checks_the_gateway_after_it(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A --gateway after `health` that is not HOST:PORT is the same usage error as before
        it."""
        said = usage_error(capsys, "health", "--gateway", "http://g:1")
        assert said.startswith("stello health: argument --gateway: give HOST:PORT")

    def test_database_url_before_the_subcommand(self) -> None:
        """--database-url may come first too."""
        args = build_parser().parse_args(["--database-url", "postgresql://x", "migrate"])
        assert args.database_url == "postgresql://x"


class TestUsageErrors:
    def test_misspelt_flag_is_named(self, capsys: pytest.CaptureFixture[str]) -> None:
        """`--lable x` reports the unknown flag and the one meant, not a missing --label."""
        err = usage_error(capsys, "fork", "abc", "--lable", "x")
        assert err == (
            "stello fork: unrecognized arguments: --lable x (did you mean --label?) "
            "(see `stello fork --help`)\n"
        )

    def test_unknown_flag_before_missing_arguments(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A misspelt flag is reported even when positional arguments are missing too."""
        err = usage_error(capsys, "send", "--stream-timout", "3")
        assert err.startswith("stello send: unrecognized arguments: --stream-timout")
        assert "did you mean --stream-timeout?" in err

    @pytest.mark.subprocess
    def test_command_level_usage_errors(self, home: Path) -> None:
        """fork without --label, or --up-to with another --context: one line, exit 2, before
        any call (the gateway named here does not exist)."""
        env = private_env(home)
        env.update(STELLO_GATEWAY="127.0.0.1:1", STELLO_KEY="k")
        done = run_cli(env, "fork", "abc")
        assert (done.returncode, done.stderr) == (
            2,
            "stello fork: --label: required (the new session's label) (see `stello fork --help`)\n",
        )
        done = run_cli(env, "fork", "abc", "--label", "x", "--context", "none", "--up-to", "2")
        assert done.returncode == 2
        assert "--up-to: inherits the records up to SEQ, so it needs --context inherit" in (
            done.stderr
        )

    @pytest.mark.parametrize(
        ("command", "said"),
        [
            pytest.param("meta", "SESSION", id="meta"),
            pytest.param("memory", "SESSION|ACTION", id="memory"),
        ],
    )
    def test_only_the_missing_argument_is_named(
        self, capsys: pytest.CaptureFixture[str], command: str, said: str
    ) -> None:
        """`stello meta` alone names SESSION as missing, not the K=V it may go without
        (`meta SESSION` shows the metadata); `stello memory` alike its ARG."""
        err = usage_error(capsys, command)
        assert err == (
            f"stello {command}: the following arguments are required: {said} "
            f"(see `stello {command} --help`)\n"
        )
        args = build_parser().parse_args([command, "abc"])
        assert (args.pairs if command == "meta" else args.rest) == []

    @pytest.mark.parametrize(
        ("argv", "said"),
        [
            pytest.param(("memory", "put", BAD, "b", "--summary", "s"), "SLUG", id="put-slug"),
            pytest.param(("memory", "put", "s", BAD, "--summary", "s"), "BODY", id="put-body"),
            pytest.param(("memory", "get", BAD), "SLUG", id="get-slug"),
            pytest.param(("memory", "abc", BAD), "TEXT", id="session-text"),
            pytest.param(("memory", BAD), "SESSION", id="session"),
            pytest.param(("--key", BAD, "migrate"), "--key", id="key-before-migrate"),
            pytest.param(("--database-url", BAD, "tree"), "--database-url", id="url-before-tree"),
            pytest.param(("send", "abc", BAD), "MESSAGE", id="message"),
        ],
    )
    def test_bytes_that_are_not_utf8_are_named_as_the_usage_names_them(
        self, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], said: str
    ) -> None:
        """An argument holding bytes that are not UTF-8 is named as the command's usage
        line names it (`memory put`'s slug was "ARG", a flag given before a command that
        lacks it was its variable's name, `key` or `database_url`)."""
        err = usage_error(capsys, *argv)
        assert f": {said}: is not valid UTF-8 (see `" in err, err

    def test_a_command_name_that_is_not_utf8_is_one_clear_line(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A command name holding bytes that are not UTF-8 is one short line showing them
        as \\xff (argparse's "invalid choice: 'bad\\udcffx' (choose from" every command);
        a choice or an unknown flag holding them shows them so too."""
        assert usage_error(capsys, BAD) == (
            "stello: 'bad\\xffx' is not a command: its name is not valid UTF-8 "
            "(see `stello --help`)\n"
        )
        err = usage_error(capsys, "digests", "--status", BAD)
        assert err.startswith("stello digests: argument --status: invalid choice: 'bad\\xffx' (")
        err = usage_error(capsys, "tree", f"--{BAD}")
        assert (
            err == "stello tree: unrecognized arguments: --bad\\xffx (see `stello tree --help`)\n"
        )

    @pytest.mark.parametrize("given", ["abc", "", "-5", "1" * 19])
    def test_a_watch_cursor_that_is_none_is_refused_here(
        self, capsys: pytest.CaptureFixture[str], given: str
    ) -> None:
        """`stello watch --after X` with X no cursor is a usage error saying where cursors
        come from: it went to the gateway, whose refusal (exit 1) named its API
        ("a cursor WatchSpace sent (SpaceEvent.cursor)"), not the command's output."""
        err = usage_error(capsys, "watch", "--after", given)
        assert err == (
            "stello watch: argument --after: expected a cursor: the number a `stello watch` "
            f"line starts with (`cursor` with --json), got {given!r} (see `stello watch --help`)\n"
        )
        assert build_parser().parse_args(["watch", "--after", "12"]).after == "12"

    def test_meta_setting_and_removing_one_key_is_refused_here(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """`stello meta S k=v --remove k` is a usage error in the command's words: the
        gateway refused it (exit 1) as "--remove #1: key 'k' is also in set", naming its
        request's field."""
        assert usage_error(capsys, "meta", "abc", "j=1", "k=v", "--remove", "k") == (
            "stello meta: --remove: k is set by a K=V too: give one or the other "
            "(see `stello meta --help`)\n"
        )

    @pytest.mark.parametrize(
        ("argv", "said"),
        [
            pytest.param(
                ("keys", "create"),
                "--space: required for a tenant key (or --admin for an admin key)",
                id="keys-create",
            ),
            pytest.param(
                ("delete", "abc"),
                "--yes: required when stdin is not a terminal to ask on (nothing was erased)",
                id="delete",
            ),
            pytest.param(
                ("spaces", "delete", "team"),
                "--yes: required when stdin is not a terminal to ask on (nothing was erased)",
                id="spaces-delete",
            ),
            pytest.param(
                ("root", "--var", "k=v"),
                "--var: fills a profile's {NAME}, so it needs --profile NAME",
                id="var",
            ),
            pytest.param(("fork", "abc"), "--label: required (the new session's label)", id="fork"),
            pytest.param(
                ("fork", "abc", "--label", "x", "--context", "none", "--up-to", "2"),
                "--up-to: inherits the records up to SEQ, so it needs --context inherit "
                "(or no --context), not --context none",
                id="up-to",
            ),
            pytest.param(
                ("meta", "abc", "j=1", "k=v", "--remove", "k"),
                "--remove: k is set by a K=V too: give one or the other",
                id="meta",
            ),
            pytest.param(
                ("memory", "list", "--summary", "s"),
                "--summary: only with `stello memory put`",
                id="memory-list",
            ),
            pytest.param(
                ("memory", "put", "slug", "body"),
                "--summary: required by `stello memory put` (the line the index shows)",
                id="memory-put",
            ),
            pytest.param(
                ("search", "q", "--session", "a", "--root", "b"),
                "--root: not with --session: give one or the other",
                id="search",
            ),
            pytest.param(
                ("retention", "set"),
                "--archive-after, --delete-after or --none: give one (the policy's steps, or "
                "no policy)",
                id="retention-none",
            ),
            pytest.param(
                ("retention", "set", "--archive-after", "30", "--none"),
                "--none: not with --archive-after or --delete-after (it sets no policy: give it "
                "alone, or the steps without it)",
                id="retention-both",
            ),
        ],
    )
    def test_a_combination_of_flags_names_the_flag_first(
        self,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
        argv: tuple[str, ...],
        said: str,
    ) -> None:
        """A flag wrong for the others given with it (or missing for them) is named first,
        as a flag's own bad value is (`--limit: must be at least 1, got 0`), exit 2, before
        any call (they read `--label is required ...`, `give --session or --root, not
        both`)."""
        monkeypatch.setenv("STELLO_GATEWAY", "127.0.0.1:1")
        monkeypatch.setenv("STELLO_KEY", "k")
        monkeypatch.setattr(sys.stdin, "isatty", lambda: False)
        command = " ".join(argv[:2]) if argv[0] in ("keys", "spaces", "retention") else argv[0]
        assert usage_error(capsys, *argv) == (
            f"stello {command}: {said} (see `stello {command} --help`)\n"
        )

    def test_bad_choice(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A value outside the choices is one line, exit 2."""
        err = usage_error(capsys, "digests", "--status", "gone")
        assert err.startswith("stello digests: argument --status: invalid choice: 'gone'")

    def test_zero_counts_are_refused(self, capsys: pytest.CaptureFixture[str]) -> None:
        """`watch --count 0` and `records --limit 0` are refused (0 is not "unlimited": leaving
        the flag out is), before any call; each names its flag as every flag error does,
        `--count: ...` (search's said `--limit must be at least 1` without the value)."""
        assert usage_error(capsys, "watch", "--count", "0") == (
            "stello watch: --count: must be at least 1, got 0 (leave it out to watch until "
            "Ctrl-C) (see `stello watch --help`)\n"
        )
        assert usage_error(capsys, "records", "abc", "--limit", "0") == (
            "stello records: --limit: must be at least 1, got 0 (leave it out for every record) "
            "(see `stello records --help`)\n"
        )
        assert usage_error(capsys, "records", "abc", "--page-size", "1001") == (
            "stello records: --page-size: must be from 1 to 1000, got 1001 "
            "(see `stello records --help`)\n"
        )
        assert usage_error(capsys, "search", "kettle", "--limit", "0") == (
            "stello search: --limit: must be at least 1, got 0 (see `stello search --help`)\n"
        )

    @pytest.mark.parametrize(
        ("argv", "said"),
        [
            pytest.param(
                ["tree", "--gateway", "http://127.0.0.1:50063"],
                "stello tree: argument --gateway: give HOST:PORT (e.g. 127.0.0.1:50063), not a "
                "URL, got 'http://127.0.0.1:50063'",
                id="url",
            ),
            pytest.param(
                ["--gateway", "127.0.0.1:99999", "tree"],
                "stello: argument --gateway: the port must be 1..65535, got '99999'",
                id="port-out-of-range",
            ),
            pytest.param(
                ["tree", "--gateway", "127.0.0.1"],
                "stello tree: argument --gateway: give HOST:PORT (e.g. 127.0.0.1:50063): the "
                "port is missing in '127.0.0.1'",
                id="no-port",
            ),
            pytest.param(
                ["health", "http://127.0.0.1:50063"],
                "stello health: argument HOST:PORT: give HOST:PORT (e.g. 127.0.0.1:50063), not "
                "a URL, got 'http://127.0.0.1:50063'",
                id="health-url",
            ),
            pytest.param(
                ["health", "127.0.0.1:99999"],
                "stello health: argument HOST:PORT: the port must be 1..65535, got '99999'",
                id="health-port",
            ),
        ],
    )
    def test_a_gateway_that_is_not_host_port(
        self, capsys: pytest.CaptureFixture[str], argv: list[str], said: str
    ) -> None:
        """--gateway and `stello health`'s HOST:PORT that are a URL, or whose port is missing
        or out of range, are usage errors saying so (gRPC's resolver text, or "is `stello
        up` running?", before)."""
        assert usage_error(capsys, *argv).startswith(said)

    def test_no_command_shows_where_to_start(self, capsys: pytest.CaptureFixture[str]) -> None:
        """`stello` alone prints a short usage with the commands to start with and where
        the rest are, exit 2 (argparse's convention for a command line that is not
        complete); it printed only "the following arguments are required: COMMAND"."""
        with pytest.raises(SystemExit) as caught:
            main([])
        out, err = capsys.readouterr()
        assert (caught.value.code, out) == (2, "")
        lines = err.splitlines()
        assert lines[0] == "usage: stello COMMAND [ARGS] (`stello --help` lists every command)"
        listed = [line.split()[1] for line in lines if line.startswith("  stello ")]
        assert listed[:3] == ["up", "root", "send"]
        assert set(listed) <= set(command_names(build_parser()))
        assert "required" not in err

    def test_an_empty_request_id_is_refused(self, capsys: pytest.CaptureFixture[str]) -> None:
        """`send --request-id ""` (a script's `--request-id "$ID"` with ID unset) is a usage
        error: it ran the turn under a new id, so running it again ran it twice."""
        assert usage_error(capsys, "send", "abc", "hi", "--request-id", "") == (
            "stello send: argument --request-id: must not be empty: give the turn's id, or "
            "leave the flag out for a new one (see `stello send --help`)\n"
        )

    def test_a_flag_is_never_taken_for_a_longer_one(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A flag a command does not have is refused, not taken as the start of a longer one:
        `stello send S hi --stream 5` (send always streams) ran the turn with a deadline of
        5 s (argparse took --stream for --stream-timeout), and `send S --stream hi` said
        '--stream-timeout: expected a number of seconds', a flag not typed."""
        assert usage_error(capsys, "send", "abc", "hi", "--stream", "5") == (
            "stello send: unrecognized arguments: --stream 5 (did you mean --stream-timeout?) "
            "(see `stello send --help`)\n"
        )
        said = usage_error(capsys, "tree", "--dep", "1")
        assert said.startswith("stello tree: unrecognized arguments: --dep 1"), said

    def test_help_tells_the_exit_codes(self, capsys: pytest.CaptureFixture[str]) -> None:
        """`stello --help` ends with what each exit code means (only the README said)."""
        with pytest.raises(SystemExit):
            main(["--help"])
        out = capsys.readouterr().out
        assert out.endswith(
            "exit codes: 0 done; 1 the command failed (one line saying why); 2 the command\n"
            "line is wrong, found here or a value typed that the gateway refused (one line\n"
            "naming the flag or argument); 130 Ctrl-C.\n"
        )

    @pytest.mark.parametrize(
        ("group", "said"),
        [
            pytest.param("keys", "create, revoke, list", id="keys"),
            pytest.param("retention", "show, set, apply, pin", id="retention"),
        ],
    )
    def test_a_group_without_its_command_lists_them(
        self, capsys: pytest.CaptureFixture[str], group: str, said: str
    ) -> None:
        """`stello keys` alone names the commands it takes, on one line (it said only
        "the following arguments are required: COMMAND")."""
        assert usage_error(capsys, group) == (
            f"stello {group}: give a command: {said} (see `stello {group} --help`)\n"
        )


class TestCtrlCWhileReadingStdin:
    @pytest.mark.parametrize(
        "read",
        [
            pytest.param(lambda: text_argument("-"), id="message-from-stdin"),
            pytest.param(lambda: confirm("Erase it?"), id="delete-question"),
        ],
    )
    def test_the_first_ctrl_c_stops_the_read(
        self, monkeypatch: pytest.MonkeyPatch, read: Callable[[], object]
    ) -> None:
        """Ctrl-C while `send S -`, `insight S -` or `import -` reads stdin, or while
        `delete` waits for its answer, ends the command at once (KeyboardInterrupt, exit 130)
        on a command's own event loop: the loop's handler only cancelled the task, which the
        blocked read never noticed, so the first Ctrl-C did nothing."""
        got: list[object] = []
        read_on: list[bool] = []

        class Typing:
            """A terminal where the person presses Ctrl-C while the read waits (the read
            goes on unless the Ctrl-C stops it, as a blocked read of a terminal does)."""

            def read(self) -> str:
                signal.raise_signal(signal.SIGINT)
                read_on.append(True)
                return "typed on"

            def readline(self) -> str:
                return self.read()

        monkeypatch.setattr(sys, "stdin", Typing())

        async def command() -> None:
            answer = read()
            got.append(await answer if inspect.isawaitable(answer) else answer)

        # As `stello_cli.main` runs a command; its own loop, so the tests' loop is untouched.
        with (
            pytest.raises(KeyboardInterrupt),
            asyncio.Runner(loop_factory=asyncio.new_event_loop) as runner,
        ):
            runner.run(command())
        assert (got, read_on) == ([], [])

"""The `stello` argument parser: a registry of command groups, and errors on one line.

Each command group (a module of this package) has ``register(commands)``,
adding its subcommands through `Commands`; `COMMAND_GROUPS` lists them, so a new
group is one module and one line here. Connection flags (``--gateway``,
``--key``, ``--space``, TLS, ``--json``, ``--timeout``) and ``--database-url``
are accepted before the subcommand as well as after it. A usage error is one
line naming the problem (an unknown flag before a missing one, with the flag
it was probably meant to be) and exits 2.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import importlib
import math
import re
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar, NoReturn

from stello import __version__
from stello.formats.file_names import shown_name
from stello_cli.output.style import read_stdin
from stello_client.connection.flags import MAX_DEADLINE_S, gateway_address, tls_options
from stello_client.errors import UsageError

Run = Callable[[argparse.Namespace], Awaitable[int]]
UNDECODED = re.compile("[\udc80-\udcff]")
"""A byte that was not UTF-8, as Python keeps it (surrogateescape)."""

COMMAND_GROUPS = (
    "stello_cli.admin.commands",
    "stello_cli.sessions.commands",
    "stello_cli.turns.talk",
    "stello_cli.space.search",
    "stello_cli.turns.chat",
    "stello_cli.space.views",
    "stello_cli.transfer.commands",
    "stello_cli.space.watch",
    "stello_cli.space.retention",
)
SESSION_HELP = (
    "the session: its id, or the first digits of it as `stello tree` shows them "
    "(enough to be unique in the space)"
)
DESCRIPTION = """\
Stello on the command line: run the services (`stello up`) and talk to them.

Client commands reach the gateway, key and space `stello up` saved, or what
--gateway, --key and --space (or STELLO_GATEWAY, STELLO_KEY, STELLO_SPACE_ID)
name; --space takes a space's name or id and may be left out when the key
reaches one space. A SESSION is a session's id or its first digits.
"""

START = """\
usage: stello COMMAND [ARGS] (`stello --help` lists every command)

  stello up                       run the services here (embedded PostgreSQL, echo model)
  stello root --label L           create a root session
  stello send SESSION MESSAGE     one turn: the reply streams as it arrives
  stello chat SESSION             talk to a session line by line
  stello fork SESSION --label L   fork a session into a new child
  stello tree                     the forest: labels, status, turns, short ids

`stello COMMAND --help` tells what a command takes.
"""
"""What `stello` alone prints (on stderr, exit 2): the commands to start with."""

EXIT_CODES = """\
exit codes: 0 done; 1 the command failed (one line saying why); 2 the command
line is wrong, found here or a value typed that the gateway refused (one line
naming the flag or argument); 130 Ctrl-C.
"""
"""The end of `stello --help`."""


class StelloParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (exit 2), unknown flags first."""

    root: ClassVar[StelloParser | None] = None
    argv: ClassVar[list[str]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # No flag is taken for the start of a longer one: `send --stream 5` (a flag send does
        # not have) set --stream-timeout 5, and a new flag would change what an old line meant.
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        """Parse; leftover arguments are reported by the subcommand they were given to."""
        argv = list(sys.argv[1:] if args is None else args)
        StelloParser.root, StelloParser.argv = self, argv
        parsed, extras = self.parse_known_args(argv, namespace)
        # argparse stops filling a `*` positional at the first flag: a command that names
        # one in `more_positionals` collects the plain arguments that follow its flags too.
        into = getattr(parsed, "more_positionals", None)
        if extras and into and not any(e.startswith("-") and e != "-" for e in extras):
            getattr(parsed, into).extend(extras)
        elif extras:
            leaf: StelloParser = getattr(parsed, "parser", self)
            leaf.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed

    def error(self, message: str) -> NoReturn:
        if message == "the following arguments are required: COMMAND" and not self._unknown_flags():
            self._no_command()
        unknown = self._unknown_flags()
        if unknown and not message.startswith("unrecognized"):
            message = f"unrecognized arguments: {' '.join(unknown)}"
        if message.startswith("unrecognized") and unknown:
            guess = difflib.get_close_matches(unknown[0].split("=")[0], self._known(), n=1)
            if guess:
                message += f" (did you mean {guess[0]}?)"
        message = readable(message)
        sys.stderr.write(f"{self.prog}: {message} (see `{self.prog} --help`)\n")
        raise SystemExit(2)

    def _no_command(self) -> NoReturn:
        """`stello` alone: where to start (`START`); a group alone (`stello keys`): its
        commands, on one line. Exit 2, as for any command line that is not complete."""
        if self is StelloParser.root:
            sys.stderr.write(START)
        else:
            names = ", ".join(command_names(self))
            sys.stderr.write(f"{self.prog}: give a command: {names} (see `{self.prog} --help`)\n")
        raise SystemExit(2)

    def _known(self) -> list[str]:
        known = set(self._option_string_actions)
        if StelloParser.root is not None:
            known |= set(StelloParser.root._option_string_actions)
        return sorted(known)

    def _unknown_flags(self) -> list[str]:
        known = self._known()
        found = []
        for token in StelloParser.argv:
            if token == "--":
                break
            if not token.startswith("-") or token == "-" or token[1:2].isdigit():
                continue
            name = token.split("=")[0]
            if name not in known:  # whole names only (no abbreviations: `__init__`)
                found.append(token)
        return found


def command_names(parser: argparse.ArgumentParser) -> list[str]:
    """The names of the commands `parser` takes (a group's, or the top level's)."""
    return [
        name
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for name in action.choices
    ]


def connection_options(parser: argparse.ArgumentParser, *, default: Any = None) -> None:
    """The flags every client command takes, before or after its name.

    The top-level parser gets real defaults; each subcommand gets them as
    SUPPRESS, so a flag given before the subcommand is not reset after it.
    """
    suppress = default is argparse.SUPPRESS
    group = parser.add_argument_group("connection (default: what `stello up` saved)")
    group.add_argument(
        "--gateway",
        type=gateway_address,
        default=default,
        metavar="HOST:PORT",
        help="STELLO_GATEWAY",
    )
    group.add_argument("--key", default=default, help="API key (STELLO_KEY)")
    group.add_argument(
        "--space",
        default=default,
        help="space name or id (STELLO_SPACE_ID); optional when the key reaches one space",
    )
    tls_options(group, default=default)
    parser.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS if suppress else False,
        help="print JSON for scripts",
    )
    parser.add_argument(
        "--timeout",
        type=seconds,
        default=argparse.SUPPRESS if suppress else None,
        metavar="S",
        help=f"seconds per call (default {CALL_TIMEOUT_S:g}; health's {HEALTH_TIMEOUT_S:g})",
    )


CALL_TIMEOUT_S = 30.0
"""How long a command waits for each call when --timeout is not given."""
HEALTH_TIMEOUT_S = 3.0
"""`stello health`'s wait when --timeout is not given (a container probe's)."""


def call_timeout(args: argparse.Namespace, default: float = CALL_TIMEOUT_S) -> float:
    """The --timeout given before or after the command, else the command's `default`."""
    given: float | None = args.timeout
    return default if given is None else given


MAX_INT32 = 2**31 - 1
"""The largest value of the API's int32 fields (counts, depths, limits)."""
MAX_INT64 = 2**63 - 1
"""The largest value of the API's int64 fields (seqs)."""


def int32(text: str) -> int:
    """An argparse type: a whole number an int32 field of the API holds (what it means, the
    command checks: the wire refused a bigger one as "Value out of range", naming nothing)."""
    return _whole(text, MAX_INT32)


def int64(text: str) -> int:
    """An argparse type: a whole number an int64 field of the API holds (a seq)."""
    return _whole(text, MAX_INT64)


def whole(text: str) -> int:
    """An argparse type: a whole number of any size, for a flag whose command checks its
    range in its own words, tighter than the wire's (`retention set --archive-after`)."""
    return _whole(text, None)


def _whole(text: str, most: int | None) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if most is None:
        return value
    if value > most:
        raise argparse.ArgumentTypeError(f"expected a whole number up to {most}, got {text!r}")
    if value < -most - 1:
        raise argparse.ArgumentTypeError(f"expected a whole number from {-most - 1}, got {text!r}")
    return value


def check_count(flag: str, value: int | None, most: int | None = None, instead: str = "") -> None:
    """A count given with `flag` (None: not given) is at least 1 (and at most `most`).

    Raises:
        UsageError: it is not, in the flags' words (`--limit: must be at least 1, got 0`),
            `instead` (what to do instead) in parentheses after.
    """
    if value is None or (value >= 1 and (most is None or value <= most)):
        return
    bounds = "at least 1" if most is None else f"from 1 to {most}"
    line = f"{flag}: must be {bounds}, got {value}"
    raise UsageError(f"{line} ({instead})" if instead else line)


def seconds(text: str) -> float:
    """An argparse type: a finite number of seconds above 0, at most a year (0, negative,
    inf, nan and a number past gRPC's range would all end in a deadline passed before the
    call)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, got {text!r}")
    if value > MAX_DEADLINE_S:
        raise argparse.ArgumentTypeError(
            f"expected at most {MAX_DEADLINE_S:,} seconds (a year), got {text!r}"
        )
    return value


class Commands:
    """Adds subcommands to a parser: client ones (connection flags) and local ones."""

    def __init__(self, sub: Any) -> None:
        self._sub = sub

    def _add(self, name: str, run: Run, help_: str, description: str | None, parent: Any) -> Any:
        target = parent if parent is not None else self._sub
        parser = target.add_parser(
            name,
            help=help_,
            description=description or help_[0].upper() + help_[1:] + ".",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        parser.set_defaults(run=run, parser=parser)
        return parser

    def client(
        self,
        name: str,
        run: Run,
        help_: str,
        description: str | None = None,
        *,
        flags: Mapping[str, str] | None = None,
        parent: Any = None,
    ) -> Any:
        """A command that talks to the gateway (under `parent`, a `group`, when given);
        `flags` names request fields as its flags."""
        parser = self._add(name, run, help_, description, parent)
        connection_options(parser, default=argparse.SUPPRESS)
        parser.set_defaults(flags=dict(flags or {}))
        return parser

    def local(
        self, name: str, run: Run, help_: str, description: str | None = None, *, parent: Any = None
    ) -> Any:
        """A command that runs here (services, database maintenance)."""
        return self._add(name, run, help_, description, parent)

    def group(self, name: str, help_: str, *, client: bool = False) -> Any:
        """A command with subcommands of its own (`stello keys create`); a `client` group's
        subcommands talk to the gateway, and its connection flags may also come between
        the group's name and theirs (`stello retention --key K show`)."""
        parser = self._sub.add_parser(name, help=help_, description=help_[0].upper() + help_[1:])
        parser.set_defaults(parser=parser)
        if client:
            connection_options(parser, default=argparse.SUPPRESS)
        return parser.add_subparsers(dest=name, required=True, metavar="COMMAND")

    @staticmethod
    def database_option(parser: Any) -> None:
        """--database-url, also accepted before the subcommand."""
        parser.add_argument("--database-url", default=argparse.SUPPRESS, help=DATABASE_HELP)


DATABASE_HELP = "PostgreSQL URL (default: STELLO_DATABASE_URL, else the embedded one)"


def session_argument(parser: Any, name: str = "session", metavar: str = "SESSION") -> None:
    """A positional SESSION argument, explained."""
    parser.add_argument(name, metavar=metavar, help=SESSION_HELP)


def text_argument(value: str) -> str:
    """A TEXT, MESSAGE or BODY argument as given; `-` reads it from stdin, less the one
    line end (``\\n`` or ``\\r\\n``) that `echo` and text files end with. Everything
    else is kept: inner and further line ends, leading and trailing spaces."""
    if value != "-":
        return value
    text: str = read_stdin(sys.stdin.read)
    if has_undecoded(text):
        raise UsageError("the text read from stdin is not valid UTF-8")
    return text.removesuffix("\n").removesuffix("\r") if text.endswith("\n") else text


INVALID_CHOICE = re.compile(r"""invalid choice: ('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*") \(choose""")
"""argparse's refusal of a value not among the choices, the value as its repr."""


def readable(message: str) -> str:
    """argparse's `message` with bytes that are not UTF-8 shown as `\\xff`: it printed them
    as lone surrogates, or in a refused choice as their repr (`\\udcff`); a command name
    that is not UTF-8 is one short line (not the list of every command)."""
    found = INVALID_CHOICE.search(message)
    value = ast.literal_eval(found.group(1)) if found else ""
    if found and has_undecoded(value):
        if message.startswith("argument COMMAND:"):
            return f"'{shown_name(value)}' is not a command: its name is not valid UTF-8"
        return f"{message[: found.start(1)]}'{shown_name(value)}'{message[found.end(1) :]}"
    return shown_name(message) if has_undecoded(message) else message


def has_undecoded(text: str) -> bool:
    """True when `text` holds bytes that were not UTF-8 (kept by Python as lone surrogates,
    from the command line or stdin)."""
    return UNDECODED.search(text) is not None


ArgumentNames = Callable[[argparse.Namespace, str, int], str | None]
"""A command's names for its arguments where one positional takes several things
(`stello memory put SLUG BODY`): given the parsed arguments, a destination and the index
of a value in it, the name its usage lines give it (None: the parser's own)."""


def argument_name(args: argparse.Namespace, dest: str, index: int = 0) -> str:
    """The argument whose value `dest` holds (its `index`th value, for a list), named as
    the usage line names it: a flag by its longest form, a positional by its metavar; the
    command's own names first (`ArgumentNames`, set as `argument_names`), and a flag given
    before the command by the top-level parser (`stello --key K migrate`: `--key`, not
    `key`)."""
    own: ArgumentNames | None = getattr(args, "argument_names", None)
    named = own(args, dest, index) if own is not None else None
    if named is not None:
        return named
    for parser in (getattr(args, "parser", None), StelloParser.root):
        for action in parser._actions if parser is not None else ():
            if action.dest != dest:
                continue
            if action.option_strings:
                return max(action.option_strings, key=len)
            if isinstance(action.metavar, tuple):
                return action.metavar[min(index, len(action.metavar) - 1)]
            return action.metavar or dest
    return dest


def typed_names(args: argparse.Namespace) -> set[str]:
    """What a person types on this command line, as its usage lines name it: the flags of
    the command (and those given before it) and the metavars of its positionals."""
    names: set[str] = set()
    for parser in (getattr(args, "parser", None), StelloParser.root):
        for action in parser._actions if parser is not None else ():
            names.update(action.option_strings)
            if not action.option_strings and action.metavar is not None:
                metavars = (
                    action.metavar if isinstance(action.metavar, tuple) else (action.metavar,)
                )
                names.update(metavars)
    return names


def build_parser() -> StelloParser:
    """The parser of every command, from `COMMAND_GROUPS`."""
    parser = StelloParser(
        prog="stello",
        description=DESCRIPTION,
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"stello {__version__}")
    parser.add_argument("--database-url", default=None, help=DATABASE_HELP)
    connection_options(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands = Commands(sub)
    for module in COMMAND_GROUPS:
        importlib.import_module(module).register(commands)
    return parser

"""chat: talk to a session line by line, with line editing, history and a few commands.

On a terminal the prompt is prompt_toolkit's (arrows edit and recall earlier
lines, kept in the config dir's ``chat_history``, readable by its owner only,
or in memory only with ``--no-history``); Ctrl-C while a reply streams
stops that reply only (nothing of the turn is stored, and the chat says so),
Ctrl-C at the prompt clears the line, Ctrl-D or ``/quit`` leaves. Lines that
start with ``/`` are commands (``/help`` lists them; ``//`` sends a line that
starts with ``/`` to the model). Without a terminal (a pipe) the lines of stdin
are read as they come, commands included, with no banner and no prompt: not after
``/fork`` or ``/switch`` either, so stdout carries the replies and what ``/tree``,
``/history`` and ``/help`` show, and stderr the chat's errors. A failed turn ends
the chat with exit 1 (after its other lines); piped, so does any failed line, a command's
too, so a script can tell.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shlex
import signal
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from stello.formats.file_names import shown_name
from stello_cli.gateway import failed_call_line, gateway, session_id, unknown_profile
from stello_cli.output import format as fmt
from stello_cli.output.style import Style, ago, one_line, plural, short_id, write
from stello_cli.parser import Commands, has_undecoded, int64, session_argument
from stello_cli.sessions.fork_options import (
    CONTEXTS,
    check_template_values,
    fork_context,
    template_values,
)
from stello_cli.space.views import draw_tree, tree_nodes
from stello_cli.turns.talk import (
    Turn,
    busy_argument,
    end_shown_line,
    failed_turn,
    newest_records,
    stream_turn,
    with_outcome,
)
from stello_client.connection.credentials import credentials_path
from stello_client.errors import ClientError, UsageError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from prompt_toolkit.history import History

    from stello_client.aio import AsyncClient
    from stello_client.exceptions import RpcError
    from stello_client.types import BusyName, ContextName, SessionSummary, SessionView

BANNER_RECORDS = 4
HISTORY_FILE = "chat_history"
HISTORY_DEFAULT = 10
MAX_HISTORY = 10_000
"""The most records /history shows (`stello records SESSION` shows every one)."""
BANNER_WIDTH = 100
HELP = """\
/help               this list
/fork [LABEL] [OPTIONS]
                    fork this session and talk to the child (LABEL: its
                    label, words need no quotes; or --label L): --context
                    none|inherit|compress, --up-to SEQ, --prompt TEXT,
                    --profile NAME, --var NAME=VALUE (--up-to alone inherits)
/switch SESSION     talk to another session (its id or first digits)
/tree               the forest, this session marked ◀
/history [N]        the newest N records of this session (default 10)
/quit               leave (Ctrl-D too)
Anything else is sent to the model (start a line with // to send one
beginning with /).
Ctrl-C while a reply streams stops it: nothing of that turn is stored."""


def _history_count(rest: str) -> int:
    """/history's N: 10 when not given, else a whole number above 0 (a bad one said so;
    0, -1 and words were taken as 10 or every record, without a word)."""
    text = rest.strip()
    if not text:
        return HISTORY_DEFAULT
    try:
        count = int(text)
    except ValueError:
        count = 0
    if not 1 <= count <= MAX_HISTORY:
        raise UsageError(
            f"/history N: N is a number of records from 1 to {MAX_HISTORY}, got {text!r}"
        )
    return count


FORK_OPTIONS = {
    "label": "/fork --label",
    "profile": "/fork --profile",
    "profile_vars": "/fork --var",
    "inherit_until_seq": "/fork --up-to",
    "context": "/fork --context",
    "prompt": "/fork --prompt",
}
"""The fields of a Fork request as /fork's options name them."""


class _LineParser(argparse.ArgumentParser):
    """The options of a chat command; a mistake is reported and the chat goes on."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def _fork_parser() -> _LineParser:
    parser = _LineParser(prog="/fork", add_help=False)
    parser.add_argument("words", nargs="*")
    parser.add_argument("--label")
    parser.add_argument("--context", choices=[c for c in CONTEXTS if c])
    parser.add_argument("--up-to", type=int64)
    parser.add_argument("--prompt")
    parser.add_argument("--profile")
    parser.add_argument("--var", action="append")
    return parser


class Chat:
    """One chat: the current session, and what each line does."""

    def __init__(
        self,
        client: AsyncClient,
        view: SessionView,
        interactive: bool,
        args: argparse.Namespace,
    ) -> None:
        self.client = client
        self.args = args  # where its gateway and key came from, for a call that fails
        self.busy: BusyName | None = args.busy
        self.view = view
        self.flags: Mapping[str, str] = args.flags
        self.interactive = interactive
        self.style = Style.of(sys.stdout)
        self.failed = 0
        self.failed_commands = 0

    @property
    def exit_code(self) -> int:
        """1 when a turn failed or, piped, any line did (a script learns it at the end);
        else 0. On a terminal a failed command was said at once, before the next line."""
        piped_failures = 0 if self.interactive else self.failed_commands
        return 1 if self.failed or piped_failures else 0

    @property
    def session_id(self) -> str:
        """The session lines are sent to."""
        return self.view.node.id

    @property
    def prompt(self) -> str:
        """`label> `, coloured on a terminal."""
        return self.style.paint(f"{one_line(self.view.node.label)}> ", "bold", "blue")

    async def banner(self) -> None:
        """The session's label, short id, turns and newest records, and how to get help."""
        node = self.view.node
        head = f"{self.style.bold(one_line(node.label))}  {self.style.dim(short_id(node.id))}"
        write(
            f"{head}  {plural(self.view.turn_count, 'turn')}, "
            f"last active {ago(self.view.last_active_at)}"
        )
        for record in await newest_records(self.client, self.session_id, BANNER_RECORDS):
            write(f"  {fmt.record_lines(record, self.style, width=BANNER_WIDTH)[0]}")
        write(
            self.style.dim("/help lists commands · Ctrl-C stops a reply · Ctrl-D or /quit leaves")
        )

    async def handle(self, line: str) -> bool:
        """Do what `line` says; False when the chat should end."""
        text = line.strip()
        if not text:
            return True
        if has_undecoded(text):  # no call can carry it: said, as a turn that failed
            self.failed += 1
            self.say(f"this line is not valid UTF-8, so it was not sent: '{shown_name(text)}'")
            return True
        if text.startswith("//"):
            await self.turn(text[1:])
            return True
        if not text.startswith("/"):
            await self.turn(text)
            return True
        name, _, rest = text.partition(" ")
        if name in ("/quit", "/exit"):
            return False
        from stello_client.exceptions import RpcError

        try:
            await self.command(name, rest)
        except ClientError as exc:  # a UsageError too
            line = str(exc)
        except RpcError as err:
            line = self.failed_line(err, self.flags)
        else:
            return True
        self.failed_commands += 1
        self.say(line)
        return True

    async def command(self, name: str, rest: str) -> None:
        """A `/command`."""
        if name == "/help":
            write(HELP)
        elif name == "/fork":
            await self.fork(shlex.split(rest))
        elif name == "/switch":
            if not rest.strip():
                raise UsageError("/switch: which session? /switch SESSION (id or first digits)")
            await self.switch_to(rest.strip())
        elif name == "/tree":
            nodes = await tree_nodes(self.client)
            write("\n".join(await draw_tree(self.client, nodes, mark=self.session_id)))
        elif name == "/history":
            count = _history_count(rest)
            newest = await newest_records(self.client, self.session_id, count)
            if not newest:
                write("no records yet: this session has had no turn")
            for record in newest:
                write("\n".join(fmt.record_lines(record, self.style)))
        else:
            raise UsageError(
                f"unknown command {name}: /help lists them (// sends a line starting with /)"
            )

    async def fork(self, argv: list[str]) -> None:
        """/fork: make a child of the current session and switch to it."""
        options = _fork_parser().parse_intermixed_args(argv)
        if options.words and options.label is not None:
            raise UsageError("/fork: give the label once: /fork LABEL, or /fork --label LABEL")
        label = " ".join(options.words) or options.label or f"{self.view.node.label} (fork)"
        try:
            values = template_values(options)
            await check_template_values(self.client, options.profile, values)
            context = fork_context(options)
        except UsageError as exc:  # in the words of `stello fork`'s flags: this is /fork's
            raise UsageError(f"/fork {exc}") from None
        session = await self._forked(options, label, context, values)
        await self.switch(session.id)

    async def _forked(
        self,
        options: argparse.Namespace,
        label: str,
        context: ContextName | None,
        values: dict[str, str],
    ) -> SessionSummary:
        """The child /fork asked for; a value of its options the gateway refuses names that
        option (`/fork --profile: ...`), not a flag of `stello chat`."""
        from stello_client.exceptions import RpcError

        try:
            return await self.client.fork(
                self.session_id,
                label,
                context=context,
                profile_vars=values,
                inherit_until_seq=options.up_to,
                prompt=options.prompt,
                profile=options.profile,
            )
        except RpcError as err:
            line = self.failed_line(err, FORK_OPTIONS)
            typed = options.profile is not None
            usage = unknown_profile(err, line, "/fork --profile", typed=typed)
            raise usage or ClientError(line) from None

    async def switch_to(self, text: str) -> None:
        """/switch: talk to the session `text` names (its id or first digits) from now on.

        Raises:
            ClientError: no such session in this space, as /switch's error.
        """
        from stello_client.exceptions import NotFound

        session = await session_id(self.client, text, "/switch", lists="/tree")
        try:
            await self.switch(session)
        except NotFound:
            raise ClientError(
                f"/switch: no session {session} in this space (/tree lists them)"
            ) from None

    async def switch(self, session: str) -> None:
        """Talk to `session` from now on (it must exist: checked first); its banner on a
        terminal only (a piped chat prints the replies and what its commands show)."""
        self.view = await self.client.get_session(session)
        if self.interactive:
            await self.banner()

    def failed_line(self, err: RpcError, flags: Mapping[str, str]) -> str:
        """What a failed call of the chat says: a gateway lost meanwhile with where its
        address came from, as at the chat's start (`failed_call_line`)."""
        return failed_call_line(err, self.args, self.client.gateway, flags)

    def say(self, message: str) -> None:
        """A message of the chat itself, on stderr."""
        write(f"{self.style.paint('stello:', 'red')} {message}", stream=sys.stderr)

    async def turn(self, text: str) -> None:
        """One turn; Ctrl-C (SIGINT) stops this reply only."""
        from stello_client.exceptions import RpcError

        state = Turn()
        task = asyncio.create_task(
            stream_turn(self.client, self.session_id, text, turn=state, busy=self.busy)
        )
        with _interrupts(task):
            try:
                await task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise
                if not state.at_line_start:
                    write()
                stored = "the turn was stored" if state.done else "nothing of this turn was stored"
                self.say(f"stopped: {stored}")
            except RpcError as err:
                self.failed += 1
                line = self.failed_line(err, self.flags)
                if state.shown:
                    end_shown_line(state)
                    line = with_outcome(line, failed_turn(err, self.session_id))
                self.say(line)


@contextlib.contextmanager
def _interrupts(task: asyncio.Task[Any]) -> Any:
    """While inside: SIGINT cancels `task` instead of the whole command."""
    loop = asyncio.get_running_loop()
    previous = signal.getsignal(signal.SIGINT)
    try:
        loop.add_signal_handler(signal.SIGINT, task.cancel)
    except (RuntimeError, ValueError):  # not the main thread: Ctrl-C ends the chat
        yield
        return
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        signal.signal(signal.SIGINT, previous)


async def _stdin_lines() -> AsyncIterator[str]:
    """Lines of stdin, read by a daemon thread so Ctrl-C never waits for a pending read."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    def pump() -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed first
            for line in sys.stdin:
                loop.call_soon_threadsafe(queue.put_nowait, line)
            loop.call_soon_threadsafe(queue.put_nowait, None)

    threading.Thread(target=pump, name="stello-stdin", daemon=True).start()
    while (line := await queue.get()) is not None:
        yield line


def history_path() -> Path:
    """The file a terminal chat keeps its typed lines in: the config dir's chat_history."""
    return credentials_path().parent / HISTORY_FILE


def chat_history(keep: bool) -> History:
    """The typed lines' history: kept in `history_path()` (readable by its owner only:
    created 0600, tightened when it exists) when `keep` and the config dir exists, else in
    memory only (gone when the chat ends)."""
    from prompt_toolkit.history import FileHistory, InMemoryHistory

    path = history_path()
    if not keep or not path.parent.is_dir():
        return InMemoryHistory()
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
    os.chmod(path, 0o600)
    return FileHistory(str(path))


async def _prompted(chat: Chat, keep: bool) -> None:
    """The terminal loop: prompt_toolkit's line editor with history (kept on disk when
    `keep`)."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.formatted_text import ANSI

    session: PromptSession[str] = PromptSession(history=chat_history(keep))
    while True:
        try:
            line = await session.prompt_async(ANSI(chat.prompt))
        except KeyboardInterrupt:
            continue  # Ctrl-C at the prompt clears the line, as in a shell
        except EOFError:
            write()  # Ctrl-D: end the prompt's line, so the shell's starts on its own
            return
        if not await chat.handle(line):
            return


async def cmd_chat(args: argparse.Namespace) -> int:
    """Talk to a session until /quit or Ctrl-D (EOF)."""
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    async with gateway(args) as client:
        view = await client.get_session(await session_id(client, args.session))  # fails now
        chat = Chat(client, view, interactive, args)
        if interactive:
            await chat.banner()
            await _prompted(chat, not args.no_history)
        else:
            async for line in _stdin_lines():
                if not await chat.handle(line):
                    break
    return chat.exit_code


def register(commands: Commands) -> None:
    """Add chat."""
    chat = commands.client(
        "chat",
        cmd_chat,
        "talk to a session line by line (/help inside lists its commands)",
        "Talk to SESSION: each line is a turn, the reply streamed. On a terminal the\n"
        "arrows edit the line and recall earlier ones; /help lists the commands\n"
        "(/fork, /switch, /tree, /history, /quit). Ctrl-C stops a reply without\n"
        "storing it; Ctrl-D leaves. The typed lines are kept for the arrows in\n"
        "chat_history in the config dir (STELLO_CONFIG_DIR), readable by you only,\n"
        "and no deletion of a session touches it: --no-history keeps them in memory\n"
        "only; delete the file to clear it. With stdin piped it reads the lines\n"
        "(commands too) to the end and exits 1 if any failed, else 0.\n\n" + HELP,
        flags={"content": "the message", "busy": "--busy"},
    )
    session_argument(chat)
    busy_argument(chat)
    chat.add_argument(
        "--no-history",
        action="store_true",
        help="keep the typed lines in memory only, not in the config dir's chat_history",
    )

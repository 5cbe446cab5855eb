"""`stello ...`: parse, run the command on one event loop, and end with the right exit code.

Exit codes: 0 done; 1 the command failed (one line on stderr: what failed
and what to do); 2 the command line is wrong (one line): found here, or a value
typed that the gateway refused (INVALID_ARGUMENT or OUT_OF_RANGE naming the
flag or argument, `stello_cli.gateway.refused_typed_value`); 130 interrupted
(Ctrl-C). A reader that closes the pipe early (``stello digests | head``) ends
the command quietly with 0.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from stello_cli.output.style import Style, one_line
from stello_cli.parser import argument_name, build_parser, has_undecoded
from stello_client.connection.flags import FileName
from stello_client.errors import ClientError, UsageError, configuration_line, rpc_error_line

if TYPE_CHECKING:
    import asyncio


def fail(message: str, code: int) -> SystemExit:
    """Print `stello: message` (red on a terminal) and answer the exit to raise."""
    style = Style.of(sys.stderr)
    sys.stderr.write(f"{style.paint('stello:', 'red', 'bold')} {message}\n")
    sys.stderr.flush()
    return SystemExit(code)


def _loop_factory(args: argparse.Namespace) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop for `stello up` (it serves); asyncio's own loop for a command (starts sooner)."""
    if args.command != "up":
        return None
    from stello.serving.runner import event_loop_factory

    return event_loop_factory()


def main(argv: Sequence[str] | None = None) -> None:
    """Run the `stello` command; errors print one line and exit non-zero.

    Ctrl-C exits 130 at any moment: while the command's modules load too (the first
    tenth of a second), where it printed a traceback and ended the process by the signal.
    """
    try:
        _main(argv)
    except KeyboardInterrupt:
        raise SystemExit(130) from None


def _main(argv: Sequence[str] | None) -> None:
    if list(sys.argv[1:] if argv is None else argv) == ["--version"]:
        # The answer needs no command group: none is loaded (`stello --version` at once).
        from stello import __version__

        sys.stdout.write(f"stello {__version__}\n")
        raise SystemExit(0)
    args = build_parser().parse_args(argv)  # --version and --help end here: nothing else loaded
    unreadable = not_utf8(args)
    if unreadable is not None:
        prog = args.parser.prog
        sys.stderr.write(f"{prog}: {unreadable}: is not valid UTF-8 (see `{prog} --help`)\n")
        raise SystemExit(2)
    import asyncio

    # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); nothing to act on here.
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    try:
        with asyncio.Runner(loop_factory=_loop_factory(args)) as runner:
            code = runner.run(args.run(args))
    except BrokenPipeError:
        # The reader went away: say nothing more (and let the interpreter's final flush
        # of stdout hit /dev/null, not the closed pipe).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(0) from None
    except UsageError as exc:
        prog = args.parser.prog
        sys.stderr.write(f"{prog}: {exc} (see `{prog} --help`)\n")
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except Exception as exc:
        line = failure_line(exc, args)
        if line is None:
            raise
        raise fail(line, 1) from None
    raise SystemExit(code)


def not_utf8(args: argparse.Namespace) -> str | None:
    """The flag (or argument) whose value holds bytes that are not UTF-8, named as its
    usage line names it (`argument_name`); None when every value is text. Python keeps
    such bytes of the command line as lone surrogates, which no call can carry; a file's
    name (`FileName`) may hold them: the file system takes them."""
    for dest, value in vars(args).items():
        values = value if isinstance(value, list) else [value]
        for index, item in enumerate(values):
            if isinstance(item, str) and not isinstance(item, FileName) and has_undecoded(item):
                return argument_name(args, dest, index)
    return None


def failure_line(exc: Exception, args: argparse.Namespace) -> str | None:
    """The line a failed command prints; None for a bug (its traceback shows).

    A library's errors are checked only when the command loaded it (an asyncpg
    error cannot reach a command that never imported asyncpg), so a command
    loads none of them just to be able to fail.
    """
    flags = getattr(args, "flags", None)
    pydantic = sys.modules.get("pydantic")
    if pydantic is not None and isinstance(exc, pydantic.ValidationError):
        from stello.serving.entry import settings_problem

        line = settings_problem(exc)  # a setting's variable, not pydantic's field and URL
        if line is not None:
            return line
    if isinstance(exc, (ClientError, OSError, ValueError)):
        return one_line(str(exc))
    if "stello_client.exceptions" in sys.modules:
        from stello_client.exceptions import ConfigurationError, RpcError

        if isinstance(exc, RpcError):
            return rpc_error_line(exc, flags=flags)
        if isinstance(exc, ConfigurationError):
            return configuration_line(exc)
    grpc = sys.modules.get("grpc")
    if grpc is not None and isinstance(exc, grpc.aio.AioRpcError):
        return rpc_error_line(exc, flags=flags)
    asyncpg = sys.modules.get("asyncpg")
    if asyncpg is not None and isinstance(exc, asyncpg.PostgresError):
        return one_line(str(exc))
    if "stello.errors" in sys.modules:
        from stello.errors import StelloError

        if isinstance(exc, StelloError):
            return one_line(str(exc))
    return None

"""Stello: tree-structured LLM conversations as gRPC services over PostgreSQL.

The kernel package: settings, database pool and migrations, auth, errors and
their gRPC mapping, the server factory, a service's command line and run, and the
generated stubs under ``stello/{common,storage,tree,agent}/v1``. It is a library:
the programs (the `stello` command, `stello up`, the console) live in `stello_cli`
and `stello_console` (docs/architecture.md lists its modules).
"""

from __future__ import annotations

import os

# gRPC's fork handlers (on in its C core by default since grpcio 1.74, though gRPC Python
# documents fork support as opt-in) restart its poller thread in every forked child; a
# child that closes its inherited descriptors before exec can then die on that poller
# (EBADF, or SIGSEGV: a third of pexpect children forked beside live calls, measured;
# subprocess's children, which close them in C at once, far more rarely). Stello forks
# only to exec, so they are off unless the environment asks for them. Read when grpc is
# first imported: every entry package imports `stello` before anything imports grpc
# (tests/kernel/test_fork.py).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

__all__ = ["__version__"]

__version__ = "0.1.0"

"""The `stello` command line: the composition roots on the top floor (STYLE §16).

`main` parses the command line, runs the command and chooses the exit code.
`stello up` (`stello_cli.up.suite`) wires the three services together in one
process; the client commands (one module per group, registered in `parser`:
`sessions/`, `turns/` (send, records, chat), `space/` (tree, search, watch,
retention), `transfer/`, and the operator ones in `admin/`) talk to a running
gateway (`gateway`); `output/` is how they print. This package is the only place
that imports the services.

gRPC's C core logs to stderr on its own (``fork_posix.cc``, ``add_port.cc``):
the variables that silence it are set here, before anything imports grpc, and
only when the caller has not set them (``GRPC_VERBOSITY=ERROR stello up`` shows
them again).
"""

from __future__ import annotations

import os

import stello  # noqa: F401 (first: its import settles gRPC fork support before grpc loads)

os.environ.setdefault("GRPC_VERBOSITY", "NONE")
os.environ.setdefault("GRPC_TRACE", "")

from stello_cli.main import main

__all__ = ["main"]

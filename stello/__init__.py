"""Stello: tree-structured LLM conversations as gRPC services over PostgreSQL.

The kernel package: settings, database pool and migrations, auth, errors and
their gRPC mapping, the server factory, the command line, and the generated
stubs under ``stello/{common,storage,tree,agent}/v1``.
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"

"""Transact: preconditions and write operations over several rooms, all or nothing (DESIGN §2).

Owns no table: each operation is the statements of the RPC it stands for, run on
the rooms' repositories in one unit of work. `operations` is its vocabulary;
`service` checks, applies and answers it, and runs GetRememberedResult.
"""

__all__ = ["operations", "service"]

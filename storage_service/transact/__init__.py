"""Transact: preconditions and write operations over several rooms, all or nothing (DESIGN §2).

Owns no table: each operation is the statements of the RPC it stands for, run on
the rooms' repositories in one unit of work. `operations` is its vocabulary;
`service` checks, applies and answers it, and runs GetRememberedResult; `wire`
parses the operations that are no other RPC's request.
"""

__all__ = ["operations", "service", "wire"]

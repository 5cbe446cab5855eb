"""Transact: preconditions and write operations over several rooms, all or nothing in one
transaction (DESIGN §2). `operations` is its vocabulary; `service` checks and applies it."""

__all__ = ["operations", "service"]

"""Clients in other languages, run end to end against real in-process servers."""

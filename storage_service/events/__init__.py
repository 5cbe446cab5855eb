"""Events: the reading side of the space outbox (DESIGN §4.6).

Owns `space_events` and `space_positions`; both services write them through
`stello.stored.events.Outbox`, as a transaction's last statement. `repository` pages and
purges them; `service` runs ReadEvents and the periodic purge; `wire` checks
ReadEvents' position and page size.
"""

__all__ = ["repository", "service", "wire"]

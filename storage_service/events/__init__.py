"""Events: the reading side of the space outbox (`space_events`, `space_positions`, DESIGN §4.6).

Both services write events through `stello.events.Outbox`; storage pages them by position
for ReadEvents and purges them past their retention.
"""

__all__ = ["repository", "service"]

"""Sweep: the provisional sessions nobody committed, removed (DESIGN §4.1).

Owns the sweep of due provisional sessions across spaces (`repository`: their
read, then per space their claim, release and delete, and the purge of expired
request keys), run by the admin's SweepProvisional and periodically by `sweeper`,
the app's background task; `service` runs its batches.
"""

__all__ = ["repository", "service", "sweeper"]

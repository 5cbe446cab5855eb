"""The client's methods by area, mixed into `AsyncClient` (`stello_client.aio`): sessions,
slots, turns, reads, shared memory, retention, watch()."""

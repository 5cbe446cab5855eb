"""The operator commands (`commands`: up, migrate, reconcile; `health`; `keys`: keys and spaces),
the database they work on (`databases`) and a Citus node out of reach as they say it (`nodes`);
`reconcile` is the tree's sweep over the public API."""

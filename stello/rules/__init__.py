"""The domain's rules storage, the tree and the gateway check alike, written once: session
metadata's limits, shared memory entries, retention days, a record's token estimate, tool
groups, session id prefixes."""

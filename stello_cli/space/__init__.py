"""What is in a space: tree, digests, profiles, whoami (`views`), its records matching a query
(`search`), its changes as they commit (`watch`) and its retention policy (`retention`)."""

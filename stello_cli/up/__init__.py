"""`stello up`, the composition root: the three services in one process (`suite`), or in N
worker processes behind one port each (`workers`), and what the `stello up` process itself
holds (`process`: one per config dir and data dir, its signals)."""

"""The session commands (`commands`: root, fork, show, rename, archive, delete, insight, memory,
consolidate), what sessions share (`shared`: the shared memory, skills, lineage), and the options
root, fork and chat's /fork take (`fork_options`)."""

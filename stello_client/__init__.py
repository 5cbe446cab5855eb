"""What every client of the gateway shares: the connection, the saved credentials, errors in words.

- `connect`: the gateway's address, key and space from flags, environment or the
  credentials `stello up` saved, and the TLS to reach it;
- `credentials`: the file `stello up` saves them in (readable by the user only);
- `errors`: a failed call as one sentence in the caller's words;
- `dicts`: gateway replies as plain dicts (the CLI's `--json`, the console's API).

The `stello` command (`stello_cli`) and the web console (`stello_console`) are
its users; it imports neither, nor any service.
"""

from __future__ import annotations

import stello  # noqa: F401 (first: its import settles gRPC fork support before grpc loads)

__all__: list[str] = []

"""A turn from request to commit: Send, SendStream, SubmitToolResults(Stream) (DESIGN §4.2,
§4.3).

- `requests`: requests -> validated turn input (and replies back);
- `service`: `TurnService`, the turn itself: BeginTurn, the context, the model
  call and tool loop, the commit;
- `rounds`: `ToolRounds`, the turn's model calls and the built-in tool calls between
  them;
- `start`: the BeginTurn request and what its answer means;
- `queue`: `TurnLine`, the busy policies (REJECT, ENQUEUE's wait in line,
  INTERRUPT's take-over);
- `state`: what a turn is made of (input, plan, new records);
- `commit`: the one Transact that commits a turn;
- `lease_keeper`: the turn lease renewed while the turn runs;
- `answer_size`, `empty_answer`: an answer too large to store, or with nothing in it.
"""

from __future__ import annotations

__all__: list[str] = []

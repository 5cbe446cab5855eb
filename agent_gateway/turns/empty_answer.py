"""An answer with nothing in it (DESIGN §4.2, §4.3).

A model answer with no tool call and no text once its reasoning is removed
(an empty answer, a content filter's blank, a reasoning model that spent
max_tokens inside ``<think>``) is a failed model call in a turn, as it is in
a consolidation or a fold (`folding.EmptyAnswer`): UNAVAILABLE
LLM_UNAVAILABLE, nothing of the turn stored, the insight kept and the lease
released, so the turn can be sent again. Stored, it would be an empty
assistant record that the Anthropic mapping leaves out of later contexts,
so the history the model sees would no longer alternate as stored.

An empty answer the provider's content filter stopped (`Completion.finish_reason`
``content_filter``: OpenAI's and Azure's ``content_filter``, Anthropic's ``refusal``)
is refused with the same status and reason, but is told as what it is: sending the
same again would likely be stopped again, so the client is told to change the
message, not to resend it.
"""

from __future__ import annotations

import logging

from agent_gateway.history.folding import held
from agent_gateway.llm import Completion, strip_think
from agent_gateway.turns.state import Plan
from stello.errors import Unavailable, new_error_id
from stello.reasons import LLM_UNAVAILABLE

log = logging.getLogger(__name__)


def check_not_empty(plan: Plan, completion: Completion) -> None:
    """Refuse an answer of `completion` that holds nothing (see the module docstring).

    Raises:
        Unavailable: reason LLM_UNAVAILABLE; what the answer held logged (never its
            text) under an error id.
    """
    if completion.tool_calls or strip_think(completion.content):
        return
    error_id = new_error_id()
    filtered = completion.finish_reason == "content_filter"
    log.warning(
        "the model answered %s in a turn of session %s (no tool call; %d completion tokens "
        "reported%s): nothing of the turn was stored (error id %s)",
        held(completion.content),
        plan.session_id,
        completion.usage.completion_tokens,
        "; stopped by the provider's content filter" if filtered else "",
        error_id,
    )
    if filtered:
        raise Unavailable(
            "the LLM provider's content filter stopped the model's answer before it said "
            "anything; nothing of the turn was stored. Sending the same message again will "
            f"likely be refused again: change what it asks (error id {error_id})",
            reason=LLM_UNAVAILABLE,
        )
    raise Unavailable(
        "the model answered nothing (no text and no tool call, or only its reasoning); "
        f"nothing of the turn was stored: send it again (error id {error_id})",
        reason=LLM_UNAVAILABLE,
    )

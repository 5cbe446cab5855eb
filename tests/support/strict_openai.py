"""A fake OpenAI-compatible model with a window, counting tokens more strictly than an estimate.

`StrictModel` answers chat completions like a model with a context window of
`window` tokens: it counts every request with its own tokenizer (one token
per CJK character, one per three other characters, 3 per message, the tool
schemas' compact JSON; far above the gateway's ceil(length / 4) for
Chinese), and a request whose prompt plus max_tokens exceeds the window is
answered as OpenAI does, HTTP 400 with code ``context_length_exceeded``. It
reports the prompt tokens it counted (the gateway calibrates from them). It
answers a compressor call (its system prompt is one of `summary_prompts`)
with a short summary naming the records it saw, any other call with a short
reply, and never more than the call's max_tokens.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from tests.support.fake_http import RecordedRequest, Reply
from tests.support.fake_openai import FakeAnswer, FakeOpenAI

CJK = re.compile("[\u3000-\u9fff\uac00-\ud7af\uf900-\uffef]")
"""CJK ideographs and punctuation, kana, hangul, full-width forms."""


def strict_tokens(text: str, per_token: int = 3) -> int:
    """One token per CJK character, one per `per_token` other characters."""
    cjk = len(CJK.findall(text))
    return cjk + math.ceil((len(text) - cjk) / per_token)


def prompt_tokens(body: dict[str, Any], per_token: int = 3) -> int:
    """The tokens of a chat completions request's messages and tools."""
    total = 0
    for message in body.get("messages", []):
        total += 3 + strict_tokens(message.get("content") or "", per_token)
        for call in message.get("tool_calls") or []:
            function = call.get("function", {})
            text = function.get("name", "") + function.get("arguments", "")
            total += strict_tokens(text, per_token)
    if body.get("tools"):
        total += strict_tokens(json.dumps(body["tools"], separators=(",", ":")), per_token)
    return total


@dataclass(slots=True)
class Refusal:
    """A request the model refused: its prompt tokens, its max_tokens, the window."""

    prompt: int
    max_tokens: int
    window: int


@dataclass(slots=True)
class StrictModel:
    """The model behind a `FakeOpenAI` (see the module docstring)."""

    window: int
    summary_prompts: frozenset[str]
    per_token: int = 3
    """Characters of a token outside CJK (2: stricter than the gateway's bound)."""
    bodies: list[dict[str, Any]] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    replies: list[FakeAnswer] = field(default_factory=list)
    """Answers to give the next conversation calls, in order (then the default)."""
    summarized: int = 0
    """Compressor calls received so far, `len(summaries)` kept as they come (each answer's
    text numbers its call: counting the list again for each made a fold of 1,600 calls
    quadratic, 1.4 million is_summary calls)."""

    def attach(self, fake: FakeOpenAI) -> None:
        """Answer every unscripted call of `fake`."""
        fake.default = lambda request: self.respond(fake, request)

    def is_summary(self, body: dict[str, Any]) -> bool:
        """Whether a request is a compressor call."""
        messages = body.get("messages") or [{}]
        return messages[0].get("content") in self.summary_prompts

    @property
    def summaries(self) -> list[dict[str, Any]]:
        """The compressor calls received."""
        return [body for body in self.bodies if self.is_summary(body)]

    @property
    def turns(self) -> list[dict[str, Any]]:
        """The other calls received."""
        return [body for body in self.bodies if not self.is_summary(body)]

    def respond(self, fake: FakeOpenAI, request: RecordedRequest) -> Reply:
        """The model's answer to one request."""
        body = request.json()
        self.bodies.append(body)
        summary = self.is_summary(body)
        if summary:
            self.summarized += 1
        prompt = prompt_tokens(body, self.per_token)
        limit = int(body.get("max_tokens") or 0)
        if prompt + limit > self.window:
            self.refused.append(Refusal(prompt, limit, self.window))
            message = (
                f"This model's maximum context length is {self.window} tokens. However, you "
                f"requested {prompt + limit} tokens ({prompt} in the messages, {limit} in the "
                "completion). Please reduce the length of the messages or completion."
            )
            error = {
                "message": message,
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
            return Reply.json({"error": error}, status=400, headers=(("x-should-retry", "false"),))
        if summary:
            lines = body["messages"][-1]["content"].count("\n")
            answer = FakeAnswer(f"Summary {self.summarized} of {lines} lines.")
        elif self.replies:
            answer = self.replies.pop(0)
        else:
            last = next(
                (m.get("content") or "" for m in reversed(body["messages"]) if m["role"] == "user"),
                "",
            )
            answer = FakeAnswer(f"Reply to: {last[:40]}")
        text = answer.text
        while limit and strict_tokens(text, self.per_token) > limit:
            text = text[: len(text) // 2]
        sized = FakeAnswer(
            text,
            answer.tool_calls,
            prompt_tokens=prompt,
            completion_tokens=strict_tokens(text, self.per_token),
            chunks=answer.chunks,
        )
        return fake.render(sized, request)

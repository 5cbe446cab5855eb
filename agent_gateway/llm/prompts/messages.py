"""The configured built-in texts (`Prompts`) and the helper LLM calls that use them.

The texts come from the registry (`agent_gateway.llm.prompts.texts`): a
preset, with a prompts file's overrides (`agent_gateway.llm.prompts.config`).
Whatever the texts, the message structures are those of STELLO-SPEC §4.9:

- session identity: one system message, the ``session_identity`` text;
- compressor: ``[system prompt, (system <role_context>)?, user
  transcript_header + "\\n" + lines]``;
- consolidator: the same, with ``memory_header + "\\n" + memory + "\\n\\n"``
  before the transcript header when the current memory is non-empty;
- COMPRESS fork: ``(system prompt or "") + "\\n\\n" + parent_context``;
- a fold of an incremental compression (DESIGN §5.14): ``[system prompt,
  user ("<previous_summary>\\n" + summary + "\\n</previous_summary>\\n\\n")? +
  transcript_header + "\\n" + (omitted_records + "\\n")? + lines]``.

Lines are ``"<role>: <content>"`` joined by newlines; tool calls are not
rendered. Answers have their ``<think>…</think>`` blocks removed (an
unclosed ``<think>`` to the end: an answer cut inside its reasoning) and are
trimmed. Memory never enters a compression (spec §4.7). The system prompt of
a compression or consolidation can be given per call (`prompt`): a
session's frozen override (DESIGN §5.16).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from agent_gateway.llm.base import LLMMessage, LLMProvider
from agent_gateway.llm.prompts.templates import render_template, template_variables
from agent_gateway.llm.prompts.texts import (
    COMPRESSOR,
    CONSOLIDATOR,
    KEYS,
    MEMORY_HEADER,
    OMITTED_RECORDS,
    PARENT_CONTEXT,
    PRESETS,
    SESSION_IDENTITY,
    TRANSCRIPT_HEADER,
    PresetName,
    PromptKey,
)

_THINK = re.compile(r"<think>.*?(?:</think>\s*|\Z)", re.DOTALL)
"""A reasoning block: closed, or unclosed to the end (an answer cut inside its reasoning by
max_tokens: what follows the tag is reasoning, never the answer)."""
_OPENED_BEFORE = re.compile(r"\A(?:(?!<think>).)*?</think>\s*", re.DOTALL)
"""Reasoning whose opening tag the answer does not hold: the text before a first ``</think>``
that no ``<think>`` precedes (a chat template that opens the reasoning in the prompt, as
DeepSeek-R1's served by vLLM does, leaves only the closing tag in the answer)."""
_BY_NAME = {key.name: key for key in KEYS}


class PromptError(ValueError):
    """Raised when a prompt text names an unknown key or uses a variable its key lacks."""


def prompt_key(name: str) -> PromptKey:
    """The key called `name`.

    Raises:
        PromptError: no such key (the message lists the known ones).
    """
    key = _BY_NAME.get(name)
    if key is None:
        known = ", ".join(_BY_NAME)
        raise PromptError(f"unknown prompt key {name!r}; the keys are {known}")
    return key


def template_problem(key: PromptKey, text: str) -> str | None:
    """What is wrong with `text` as the template of `key`; None when it is fine."""
    used = template_variables(text)
    for name in used:
        if name not in key.variables:
            has = ", ".join(f"{{{v}}}" for v in key.variables) or "no variables"
            return (
                f"{key.name} uses the template variable {{{name}}}, which it does not have "
                f"(it has {has}); write {{{{ and }}}} for literal braces"
            )
    for name in key.required:
        if name not in used:
            return f"{key.name} must contain {{{name}}} (or its value would be lost)"
    return None


@dataclass(frozen=True, slots=True)
class Prompts:
    """A complete set of the built-in texts: every key of the registry, checked.

    Build it with `Prompts.preset`; the composition root passes one set to
    every path that adds text to a model call.
    """

    texts: Mapping[str, str] = field(default_factory=lambda: dict(PRESETS["en"]))

    def __post_init__(self) -> None:
        missing = [key.name for key in KEYS if key.name not in self.texts]
        if missing:
            raise PromptError(f"prompt set without {', '.join(missing)}")
        for name, text in self.texts.items():
            problem = template_problem(prompt_key(name), text)
            if problem is not None:
                raise PromptError(problem)

    @classmethod
    def preset(cls, name: PresetName = "en", overrides: Mapping[str, str] | None = None) -> Prompts:
        """The preset's texts, each key of `overrides` replaced.

        Raises:
            PromptError: an unknown preset or key, or a text its key cannot take.
        """
        texts = PRESETS.get(name)
        if texts is None:
            raise PromptError(f"unknown prompt preset {name!r}; the presets are en, zh")
        return cls({**texts, **(overrides or {})})

    def text(self, key: PromptKey, **values: str) -> str:
        """The text of `key` with its variables replaced by `values`."""
        return render_template(self.texts[key.name], values)

    def identity(self, label: str) -> str:
        """The session identity message's text for `label` (spec §4.5.1 row 3)."""
        return self.text(SESSION_IDENTITY, label=label)

    def with_parent_context(self, system_prompt: str | None, summary: str) -> str:
        """The child's system prompt after a COMPRESS fork (spec §4.9 item 6): the prompt, a
        blank line, the <parent_context> block; without a prompt (None or blank) the block
        alone, not led by blank lines (unlike the spec's `(systemPrompt ?? '') + "\\n\\n"`: a
        person reading `stello show` saw two empty lines first; issue 36)."""
        block = self.text(PARENT_CONTEXT, summary=summary)
        if system_prompt is None or not system_prompt.strip():
            return block
        return f"{system_prompt}\n\n{block}"

    def compress_messages(
        self,
        records: Iterable[Transcribable],
        *,
        prompt: str | None = None,
        role_context: str | None = None,
    ) -> list[LLMMessage]:
        """The messages of a compressor call; `prompt` defaults to the compressor text."""
        return [
            LLMMessage("system", self.text(COMPRESSOR) if prompt is None else prompt),
            *_role_context(role_context),
            LLMMessage("user", self._transcript(records)),
        ]

    def fold_messages(
        self,
        summary: str | None,
        records: Iterable[Transcribable],
        *,
        prompt: str | None = None,
        omitted: int = 0,
    ) -> list[LLMMessage]:
        """The messages of one fold of a compression (DESIGN §5.14): the previous summary,
        when there is one, then the transcript (after the `omitted_records` line when
        `omitted` older records are left out); `prompt` defaults to the compressor text."""
        previous = f"<previous_summary>\n{summary}\n</previous_summary>\n\n" if summary else ""
        lines = transcript(records)
        if omitted:
            lines = f"{self.text(OMITTED_RECORDS, count=str(omitted))}\n{lines}"
        return [
            LLMMessage("system", self.text(COMPRESSOR) if prompt is None else prompt),
            LLMMessage("user", f"{previous}{self.text(TRANSCRIPT_HEADER)}\n{lines}"),
        ]

    def consolidate_messages(
        self,
        current_memory: str | None,
        records: Iterable[Transcribable],
        *,
        prompt: str | None = None,
        role_context: str | None = None,
    ) -> list[LLMMessage]:
        """The messages of a consolidator call; `prompt` defaults to the consolidator text."""
        memory = f"{self.text(MEMORY_HEADER)}\n{current_memory}\n\n" if current_memory else ""
        return [
            LLMMessage("system", self.text(CONSOLIDATOR) if prompt is None else prompt),
            *_role_context(role_context),
            LLMMessage("user", memory + self._transcript(records)),
        ]

    def _transcript(self, records: Iterable[Transcribable]) -> str:
        return f"{self.text(TRANSCRIPT_HEADER)}\n{transcript(records)}"


class Transcribable(Protocol):
    """Anything with a role and a text content (a stored record, an LLM message)."""

    @property
    def role(self) -> str:
        """system, user, assistant or tool."""
        ...

    @property
    def content(self) -> str:
        """The text."""
        ...


def transcript(records: Iterable[Transcribable]) -> str:
    """The records as ``"<role>: <content>"`` lines joined by newlines."""
    return "\n".join(f"{r.role}: {r.content}" for r in records)


def strip_think(text: str) -> str:
    """`text` without ``<think>…</think>`` blocks (an unclosed ``<think>`` removed to the end,
    and the text before a ``</think>`` that no ``<think>`` opens: reasoning the prompt opened),
    trimmed; "" when the answer was only reasoning."""
    return _THINK.sub("", _OPENED_BEFORE.sub("", text, count=1)).strip()


def _role_context(role_context: str | None) -> list[LLMMessage]:
    if not role_context:
        return []
    return [LLMMessage("system", f"<role_context>\n{role_context}\n</role_context>")]


async def compress_records(
    provider: LLMProvider,
    records: Sequence[Transcribable],
    prompts: Prompts,
    *,
    prompt: str | None = None,
    role_context: str | None = None,
) -> str:
    """Summarise `records` with `provider`; provider errors propagate.

    `prompt` defaults to the set's compressor text; a fork passes its
    fork_compressor text, a session its frozen override.
    """
    messages = prompts.compress_messages(records, prompt=prompt, role_context=role_context)
    completion = await provider.complete(messages)
    return strip_think(completion.content)


async def consolidate_records(
    provider: LLMProvider,
    current_memory: str | None,
    records: Sequence[Transcribable],
    prompts: Prompts,
    *,
    prompt: str | None = None,
    role_context: str | None = None,
) -> str:
    """The new memory of a session from its current memory and all its records."""
    messages = prompts.consolidate_messages(
        current_memory, records, prompt=prompt, role_context=role_context
    )
    completion = await provider.complete(messages)
    return strip_think(completion.content)

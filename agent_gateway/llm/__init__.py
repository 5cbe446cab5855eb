"""LLM providers behind one interface (DESIGN §6), and the helper calls that use them.

- `base`: the interface (`LLMProvider`), its messages and stream events, `estimate_tokens`;
- `echo`: the offline `echo` provider (it also answers `/tool NAME {json}` with tool calls);
- `lazy`: the configured provider, built on first use, and what one without its key says;
- `deadlines`: the caller's deadline a model call is made within;
- `tool_arguments`: the tool arguments a model wrote, read as a JSON object;
- `prompts/`: the built-in texts, the prompts file, the helper calls' messages;
- `network/`: what talks HTTP to the providers.

The network providers live in `agent_gateway.llm.network.openai_provider` and
`agent_gateway.llm.network.anthropic_provider`; `build_provider` imports them only when
they are configured, so the SDKs cost nothing to a gateway running `echo`.
"""

from __future__ import annotations

from pydantic import SecretStr

from agent_gateway.llm.base import (
    Completion,
    Done,
    FinishReason,
    JsonObject,
    LLMMessage,
    LLMProvider,
    Role,
    StreamEvent,
    TextDelta,
    ToolCallEvent,
    ToolCallSpec,
    ToolSpec,
    Usage,
    collect,
    estimate_tokens,
)
from agent_gateway.llm.echo import DEFAULT_MAX_CONTEXT_TOKENS, EchoProvider, parse_tool_commands
from agent_gateway.llm.prompts.messages import (
    PromptError,
    Prompts,
    compress_records,
    consolidate_records,
    prompt_key,
    strip_think,
    template_problem,
    transcript,
)
from agent_gateway.llm.prompts.texts import KEYS, PRESETS, PresetName, PromptKey
from agent_gateway.llm.tool_arguments import RAW_ARGUMENTS_KEY, parse_tool_arguments
from stello.errors import FailedPrecondition
from stello.reasons import LLM_API_KEY_MISSING
from stello.settings import StelloSettings

__all__ = [
    "DEFAULT_MAX_CONTEXT_TOKENS",
    "KEYS",
    "PRESETS",
    "RAW_ARGUMENTS_KEY",
    "Completion",
    "Done",
    "EchoProvider",
    "FinishReason",
    "JsonObject",
    "LLMMessage",
    "LLMProvider",
    "PresetName",
    "PromptError",
    "PromptKey",
    "Prompts",
    "Role",
    "StreamEvent",
    "TextDelta",
    "ToolCallEvent",
    "ToolCallSpec",
    "ToolSpec",
    "Usage",
    "build_provider",
    "collect",
    "compress_records",
    "consolidate_records",
    "estimate_tokens",
    "missing_api_key",
    "parse_tool_arguments",
    "parse_tool_commands",
    "prompt_key",
    "strip_think",
    "template_problem",
    "transcript",
]


def build_provider(
    settings: StelloSettings,
    *,
    max_context_tokens: int = DEFAULT_MAX_CONTEXT_TOKENS,
    echo_delay_s: float = 0.0,
) -> LLMProvider:
    """The provider `settings.llm_provider` names.

    Args:
        settings: the process settings (`STELLO_LLM_PROVIDER` and the provider's own:
            base URL, key, model, context window, answer cap, `STELLO_LLM_TIMEOUT_S`,
            `STELLO_LLM_MAX_RETRIES`).
        max_context_tokens: the context window the `echo` provider reports (the
            network providers report `STELLO_OPENAI_MAX_CONTEXT_TOKENS` /
            `STELLO_ANTHROPIC_MAX_CONTEXT_TOKENS`).
        echo_delay_s: seconds the `echo` provider waits before each streamed delta.

    Raises:
        FailedPrecondition: the provider's API key is missing (anthropic always
            needs one; openai needs one unless `STELLO_OPENAI_BASE_URL` points at
            a compatible server, which then gets a placeholder key).
    """
    missing = missing_api_key(settings)
    if missing is not None:
        raise FailedPrecondition(missing, reason=LLM_API_KEY_MISSING)
    if settings.llm_provider == "openai":
        from agent_gateway.llm.network.openai_provider import OpenAIProvider

        return OpenAIProvider(
            model=settings.openai_model,
            api_key=_secret(settings.openai_api_key),
            base_url=settings.openai_base_url,
            timeout_s=settings.llm_timeout_s,
            max_retries=settings.llm_max_retries,
            max_context_tokens=settings.openai_max_context_tokens,
            max_tokens=settings.openai_max_tokens,
            max_tokens_param=settings.openai_max_tokens_param,
            record_bytes=settings.max_record_bytes,
        )
    if settings.llm_provider == "anthropic":
        from agent_gateway.llm.network.anthropic_provider import AnthropicProvider

        return AnthropicProvider(
            model=settings.anthropic_model,
            api_key=_secret(settings.anthropic_api_key) or "",  # never "": checked above
            base_url=settings.anthropic_base_url,
            max_tokens=settings.anthropic_max_tokens,
            timeout_s=settings.llm_timeout_s,
            max_retries=settings.llm_max_retries,
            max_context_tokens=settings.anthropic_max_context_tokens,
            record_bytes=settings.max_record_bytes,
        )
    return EchoProvider(max_context_tokens=max_context_tokens, delay_s=echo_delay_s)


def missing_api_key(settings: StelloSettings) -> str | None:
    """What the operator must set when the configured provider has no API key, naming the
    variable (None: nothing is missing). For the log and the operator, never a client."""
    if settings.llm_provider == "openai":
        if _secret(settings.openai_api_key) is None and not settings.openai_base_url:
            return (
                "STELLO_OPENAI_API_KEY is not set: the openai provider needs an API key "
                "(or set STELLO_OPENAI_BASE_URL to a compatible server that needs none)"
            )
    if settings.llm_provider == "anthropic" and _secret(settings.anthropic_api_key) is None:
        return "STELLO_ANTHROPIC_API_KEY is not set: the anthropic provider needs an API key"
    return None


def _secret(value: SecretStr | None) -> str | None:
    """The secret's text, or None when unset or blank."""
    if value is None:
        return None
    text = value.get_secret_value().strip()
    return text or None

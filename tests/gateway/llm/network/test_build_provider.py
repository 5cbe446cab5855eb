"""`build_provider` for the network providers: a working provider, or a clear refusal."""

from __future__ import annotations

import ssl
import subprocess
import sys
from typing import Any

import pytest
from pydantic import SecretStr

from agent_gateway.llm import LLMMessage, build_provider
from agent_gateway.llm.network.anthropic_provider import AnthropicProvider
from agent_gateway.llm.network.openai_provider import OpenAIProvider
from stello.errors import FailedPrecondition
from stello.settings import StelloSettings
from tests.gateway.llm.network.support import KEY
from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_openai import FakeOpenAI

HI = [LLMMessage("user", "hi")]


class TestBuildOpenAI:
    async def test_from_environment(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """STELLO_* variables alone build an openai provider that reaches the configured server."""
        async with FakeOpenAI() as fake:
            fake.reply("from env")
            monkeypatch.setenv("STELLO_LLM_PROVIDER", "openai")
            monkeypatch.setenv("STELLO_OPENAI_BASE_URL", fake.base_url)
            monkeypatch.setenv("STELLO_OPENAI_API_KEY", KEY)
            monkeypatch.setenv("STELLO_OPENAI_MODEL", "local-model")
            monkeypatch.setenv("STELLO_OPENAI_MAX_CONTEXT_TOKENS", "32768")
            monkeypatch.setenv("STELLO_LLM_TIMEOUT_S", "3")
            monkeypatch.setenv("STELLO_LLM_MAX_RETRIES", "0")
            provider = build_provider(StelloSettings())
            assert isinstance(provider, OpenAIProvider)
            async with provider:
                assert provider.max_context_tokens == 32768
                assert (await provider.complete(HI)).content == "from env"
            assert fake.chat_bodies()[0]["model"] == "local-model"
            assert fake.requests[0].headers["authorization"] == f"Bearer {KEY}"

    async def test_answer_cap_from_environment(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """STELLO_OPENAI_MAX_TOKENS caps an answer and STELLO_OPENAI_MAX_TOKENS_PARAM names the
        parameter that carries it."""
        async with FakeOpenAI() as fake:
            fake.reply("capped")
            monkeypatch.setenv("STELLO_LLM_PROVIDER", "openai")
            monkeypatch.setenv("STELLO_OPENAI_BASE_URL", fake.base_url)
            monkeypatch.setenv("STELLO_OPENAI_MAX_TOKENS", "4096")
            monkeypatch.setenv("STELLO_OPENAI_MAX_TOKENS_PARAM", "max_completion_tokens")
            provider = build_provider(StelloSettings())
            assert isinstance(provider, OpenAIProvider)
            async with provider:
                await provider.complete(HI, max_tokens=32_000)
            body = fake.chat_bodies()[0]
            assert body["max_completion_tokens"] == 4096 and "max_tokens" not in body

    def test_default_answer_cap(self) -> None:
        """By default the cap is 16384 (gpt-4o-mini's output limit), sent as max_tokens."""
        settings = StelloSettings()
        assert (settings.openai_max_tokens, settings.openai_max_tokens_param) == (
            16_384,
            "max_tokens",
        )

    def test_unknown_cap_parameter_refused(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A parameter name other than the two the API knows is refused when settings load."""
        monkeypatch.setenv("STELLO_OPENAI_MAX_TOKENS_PARAM", "max_output_tokens")
        with pytest.raises(ValueError, match="max_completion_tokens"):
            StelloSettings()

    def test_local_server_needs_no_key(self) -> None:
        """With a base URL and no key (a local server), the provider is built with a placeholder."""
        settings = StelloSettings(llm_provider="openai", openai_base_url="http://127.0.0.1:1/v1")
        assert isinstance(build_provider(settings), OpenAIProvider)

    def test_openai_without_key_or_url(self) -> None:
        """OpenAI itself without a key is refused at build time, naming the setting."""
        settings = StelloSettings(llm_provider="openai", openai_api_key=SecretStr("  "))
        with pytest.raises(FailedPrecondition, match="STELLO_OPENAI_API_KEY is not set") as caught:
            build_provider(settings)
        assert caught.value.reason == "LLM_API_KEY_MISSING"


class TestBuildAnthropic:
    async def test_from_settings(self) -> None:
        """Anthropic settings build a provider that reaches the configured server and model."""
        async with FakeAnthropic() as fake:
            fake.reply("hello")
            settings = StelloSettings(
                llm_provider="anthropic",
                anthropic_base_url=fake.base_url,
                anthropic_api_key=SecretStr(KEY),
                anthropic_model="claude-test",
                anthropic_max_tokens=321,
                anthropic_max_context_tokens=1000,
            )
            provider = build_provider(settings)
            assert isinstance(provider, AnthropicProvider)
            async with provider:
                assert provider.max_context_tokens == 1000
                assert (await provider.complete(HI)).content == "hello"
            body = fake.message_bodies()[0]
            assert (body["model"], body["max_tokens"]) == ("claude-test", 321)

    def test_missing_key(self) -> None:
        """Anthropic without a key is refused at build time with a clear FAILED_PRECONDITION."""
        settings = StelloSettings(llm_provider="anthropic", anthropic_base_url="http://x")
        with pytest.raises(FailedPrecondition, match="STELLO_ANTHROPIC_API_KEY is not set"):
            build_provider(settings)


class TestLazyImport:
    def test_echo_gateway_loads_no_sdk(self) -> None:
        """Importing the LLM package and building echo loads neither SDK (they load on demand)."""
        code = (
            "import sys\n"
            "from agent_gateway.llm import build_provider\n"
            "from stello.settings import StelloSettings\n"
            "build_provider(StelloSettings(llm_provider='echo'))\n"
            "assert 'openai' not in sys.modules and 'anthropic' not in sys.modules\n"
        )
        subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


class TestTls:
    async def test_providers_share_one_verifying_context(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Every provider of the process verifies TLS with one context: its CA bundle is
        loaded once, not once per provider made (each SDK client made its own: ~20 ms of
        CPU each, a twentieth of the provider tests' time)."""
        loads: list[object] = []
        load = ssl.SSLContext.load_verify_locations

        def counted(context: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
            loads.append(context)
            load(context, *args, **kwargs)

        monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
        settings = (
            StelloSettings(
                llm_provider="openai", openai_base_url="http://x", openai_api_key=SecretStr(KEY)
            ),
            StelloSettings(
                llm_provider="anthropic",
                anthropic_base_url="http://x",
                anthropic_api_key=SecretStr(KEY),
            ),
        )
        for made in [build_provider(s) for s in settings * 2]:
            assert isinstance(made, OpenAIProvider | AnthropicProvider)
            await made.aclose()
        assert len(loads) <= 1, f"the CA bundle was loaded {len(loads)} times"

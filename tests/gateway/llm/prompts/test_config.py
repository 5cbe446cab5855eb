"""The prompts file and preset settings, checked at start (DESIGN §5.16, README "Prompts")."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from agent_gateway.config import GatewaySettings
from agent_gateway.llm import KEYS, PRESETS, Prompts
from agent_gateway.llm.prompts.config import PromptsFileError, load_prompts, parse_prompts
from agent_gateway.llm.prompts.texts import COMPRESSOR, CONSOLIDATOR, SESSION_IDENTITY
from tests.gateway.llm.support import CHINESE, ENGLISH

EXAMPLE = '''\
# Replace two texts; everything else stays the preset's.
session_identity = "<session_identity>\\nYou are working on {label}.\\n</session_identity>"
consolidator = """Summarise the conversation for the record.
Keep decisions and open questions."""
'''


def write(tmp_path: Path, text: str) -> Path:
    """`text` as a prompts file in `tmp_path`."""
    path = tmp_path / "prompts.toml"
    path.write_text(text, encoding="utf-8")
    return path


class TestSettings:
    """STELLO_GATEWAY_PROMPTS and STELLO_GATEWAY_PROMPTS_FILE."""

    def test_defaults(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """With no variable the preset is en and there is no file."""
        monkeypatch.delenv("STELLO_GATEWAY_PROMPTS", raising=False)
        monkeypatch.delenv("STELLO_GATEWAY_PROMPTS_FILE", raising=False)
        config = GatewaySettings()
        assert (config.prompts, config.prompts_file) == ("en", None)
        assert load_prompts(config.prompts, config.prompts_file) == ENGLISH

    def test_zh_from_environment(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """STELLO_GATEWAY_PROMPTS=zh selects the reference's texts."""
        monkeypatch.setenv("STELLO_GATEWAY_PROMPTS", "zh")
        config = GatewaySettings()
        assert load_prompts(config.prompts, config.prompts_file) == CHINESE

    def test_unknown_preset_refused(self) -> None:
        """A preset other than en or zh is refused naming the setting."""
        with pytest.raises(ValidationError, match="prompts"):
            GatewaySettings(prompts="fr")  # type: ignore[arg-type]  # deliberately not a preset


class TestFile:
    """The TOML file of overrides."""

    def test_example_replaces_exactly_its_keys(self, tmp_path: Path) -> None:
        """The README's kind of file replaces the keys it names; the others are the preset's."""
        prompts = load_prompts("zh", write(tmp_path, EXAMPLE))
        assert prompts.identity("Notes") == (
            "<session_identity>\nYou are working on Notes.\n</session_identity>"
        )
        assert prompts.text(CONSOLIDATOR).startswith("Summarise the conversation for the record.")
        changed = {SESSION_IDENTITY.name, CONSOLIDATOR.name}
        for key in KEYS:
            if key.name not in changed:
                assert prompts.texts[key.name] == CHINESE.texts[key.name], key.name

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            pytest.param(
                'compressor = "ok"\ncompresor = "typo"\n',
                r"prompts.toml, line 2: unknown prompt key 'compresor'; the keys are "
                r"session_identity, compressor",
                id="unknown-key",
            ),
            pytest.param(
                '\n\nconsolidator = "Sum up {label}."\n',
                r"prompts.toml, line 3: consolidator uses the template variable \{label\}, "
                r"which it does not have \(it has no variables\)",
                id="unknown-variable",
            ),
            pytest.param(
                'session_identity = "In {lable}."\n',
                r"line 1: session_identity uses the template variable \{lable\}.*\{label\}",
                id="misspelt-variable",
            ),
            pytest.param(
                'parent_context = "Background."\n',
                r"line 1: parent_context must contain \{summary\}",
                id="required-variable",
            ),
            pytest.param(
                "compressor = 3\n",
                r"line 1: compressor must be a string, not a TOML int",
                id="not-a-string",
            ),
            pytest.param(
                "[compressor]\ntext = 'x'\n",
                r"line 1: compressor must be a string, not a TOML dict",
                id="table",
            ),
            pytest.param(
                'compressor = "unclosed\n',
                r"prompts.toml: not valid TOML: .*line 1",
                id="bad-toml",
            ),
        ],
    )
    def test_invalid(self, tmp_path: Path, text: str, message: str) -> None:
        """A bad file is refused with a message naming the file, line, key and variable."""
        with pytest.raises(PromptsFileError, match=message):
            load_prompts("en", write(tmp_path, text))

    def test_every_problem_at_once(self) -> None:
        """Several bad keys are all named in one message."""
        with pytest.raises(PromptsFileError) as caught:
            parse_prompts('nope = "a"\ncompressor = "{x}"\n', "p.toml")
        assert "p.toml, line 1: unknown prompt key 'nope'" in str(caught.value)
        assert "p.toml, line 2: compressor uses the template variable {x}" in str(caught.value)

    def test_unreadable(self, tmp_path: Path) -> None:
        """A missing file is refused naming it and the setting."""
        missing = tmp_path / "missing.toml"
        with pytest.raises(PromptsFileError, match=f"cannot read the prompts file {missing}"):
            load_prompts("en", missing)

    def test_literal_braces(self, tmp_path: Path) -> None:
        """Doubled braces are literal; JSON-like braces need no escaping."""
        path = write(
            tmp_path, 'compressor = "Answer as {{\\"summary\\": ...}} or { \\"a\\": 1 }"\n'
        )
        assert load_prompts("en", path).text(COMPRESSOR) == (
            'Answer as {"summary": ...} or { "a": 1 }'
        )


def readme_block(marker: str) -> str:
    """The fenced block after `marker` in README.md."""
    readme = (Path(__file__).resolve().parents[4] / "README.md").read_text(encoding="utf-8")
    after = readme.split(marker, 1)[1]
    return after.split("```toml\n", 1)[1].split("```", 1)[0]


class TestReadme:
    """README's "Prompts" section says what the code does."""

    def test_defaults_block_is_the_english_preset(self) -> None:
        """The defaults README lists, read as a prompts file, are exactly the en preset."""
        assert parse_prompts(readme_block("<!-- prompts defaults:")) == dict(PRESETS["en"])

    def test_example_is_valid(self) -> None:
        """README's example file is accepted and replaces the two keys it names."""
        overrides = parse_prompts(readme_block("<!-- prompts example:"))
        assert set(overrides) == {SESSION_IDENTITY.name, CONSOLIDATOR.name}
        prompts = Prompts.preset("en", overrides)
        assert (
            prompts.identity("X")
            == "<session_identity>\nYou are working on: X\n</session_identity>"
        )

    def test_every_key_documented(self) -> None:
        """The keys table names every key."""
        readme = (Path(__file__).resolve().parents[4] / "README.md").read_text(encoding="utf-8")
        assert [key.name for key in KEYS if f"| `{key.name}` |" not in readme] == []


@pytest.mark.subprocess
class TestStartup:
    """`python -m agent_gateway` stops before anything starts when the prompts are not valid."""

    @pytest.mark.parametrize(
        ("variables", "text", "message"),
        [
            pytest.param(
                {},
                'compresor = "x"\n',
                "prompts.toml, line 1: unknown prompt key 'compresor'",
                id="unknown-key",
            ),
            pytest.param(
                {},
                'compressor = "{label}"\n',
                "prompts.toml, line 1: compressor uses the template variable {label}",
                id="unknown-variable",
            ),
            pytest.param({}, "compressor = \n", "prompts.toml: not valid TOML", id="bad-toml"),
            pytest.param(
                {"STELLO_GATEWAY_PROMPTS_FILE": "/nonexistent/prompts.toml"},
                None,
                "cannot read the prompts file /nonexistent/prompts.toml",
                id="unreadable",
            ),
            pytest.param(
                {"STELLO_GATEWAY_PROMPTS": "fr"},
                None,
                "agent_gateway: STELLO_GATEWAY_PROMPTS: Input should be 'en' or 'zh'\n",
                id="unknown-preset",
            ),
        ],
    )
    async def test_refused(
        self, tmp_path: Path, variables: dict[str, str], text: str | None, message: str
    ) -> None:
        """The process exits 1 with the message on stderr, without touching a database."""
        env = {
            **os.environ,
            # Nothing may be reached: a start that got this far would fail differently.
            "STELLO_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none",
            "STELLO_GATEWAY_PORT": "0",
            **variables,
        }
        if text is not None:
            env["STELLO_GATEWAY_PROMPTS_FILE"] = str(write(tmp_path, text))
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "agent_gateway",
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        _, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
        errors = stderr.decode()
        assert process.returncode == 1, errors
        assert errors.startswith("agent_gateway: ")
        assert message in errors
        assert "Traceback" not in errors

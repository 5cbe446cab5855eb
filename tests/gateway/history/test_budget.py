"""Counting a prompt in a provider's tokens, calibration, the window's shares, packing folds."""

from __future__ import annotations

import pytest

from agent_gateway.history.budget import Calibration, Counter, Window, bound
from agent_gateway.history.folding import Line, Packer, cut
from agent_gateway.llm import LLMMessage, ToolCallSpec, ToolSpec
from stello.errors import InvalidArgument
from stello.rules.tokens import estimate_tokens


class TestBound:
    @pytest.mark.parametrize(
        ("text", "tokens"),
        [
            pytest.param("", 0, id="empty"),
            pytest.param("abc", 1, id="three-ascii"),
            pytest.param("abcd", 2, id="four-ascii"),
            pytest.param("你好", 2, id="cjk"),
            pytest.param("a你b", 2, id="mixed"),
            pytest.param("🎉ü", 2, id="emoji-accent"),
        ],
    )
    def test_ascii_in_threes_others_alone(self, text: str, tokens: int) -> None:
        """ASCII characters count three to a token, every other character one."""
        assert bound(text) == tokens

    def test_chinese_is_four_times_the_estimate(self) -> None:
        """Storage's estimate under-counts Chinese four times; the bound does not."""
        text = "字" * 400
        assert (estimate_tokens(text), bound(text)) == (100, 400)


class TestCounter:
    def test_messages_count_calls_overhead_and_tools(self) -> None:
        """A message counts its content, its tool calls and 4 tokens; a tool its schema."""
        counter = Counter(Calibration())
        call = ToolCallSpec("c1", "abc", {"q": 1})  # arguments {"q":1}: 7 characters
        message = LLMMessage("assistant", "abcdef", (call,))
        assert counter.message(message) == 2 + 1 + 3 + 4
        tool = ToolSpec("t", "d", {"type": "object"})
        assert counter.messages([message], [tool]) > counter.messages([message])

    def test_to_estimate_is_at_least_what_fits(self) -> None:
        """The estimate budget covers any ASCII records that fit the tokens (the least dense)."""
        counter = Counter(Calibration())
        text = "x" * 3_000
        assert estimate_tokens(text) <= counter.to_estimate(counter.text(text))


class TestCalibration:
    def test_a_stricter_tokenizer_raises_the_factor(self) -> None:
        """A provider counting 1.5 times the bound makes the counter count 1.5 times."""
        calibration = Calibration()
        counter = Counter(calibration)
        calibration.observe(reported=1_500, bounded=1_000)
        assert calibration.factor == 1.5
        assert counter.text("abc" * 100) == 150

    def test_never_below_the_bound_and_decays_back(self) -> None:
        """A provider counting less never lowers the factor under 1; a raised one decays."""
        calibration = Calibration()
        calibration.observe(reported=500, bounded=1_000)
        assert calibration.factor == 1.0
        calibration.observe(reported=2_000, bounded=1_000)
        for _ in range(10):
            calibration.observe(reported=1_000, bounded=1_000)
        assert 1.0 < calibration.factor < 2.0

    def test_no_report_changes_nothing(self) -> None:
        """A provider that reports no prompt tokens leaves the factor alone."""
        calibration = Calibration(1.25)
        calibration.observe(reported=0, bounded=1_000)
        assert calibration.factor == 1.25


class TestWindow:
    def test_shares(self) -> None:
        """80% threshold, 40% low water, an eighth for a summary, half for one message."""
        window = Window(8_000, 1 << 20)
        assert (window.threshold, window.low_water) == (6_400, 3_200)
        assert (window.summary_tokens, window.record_tokens) == (1_000, 4_000)

    def test_reply_fits_the_window_and_a_record(self) -> None:
        """max_tokens leaves the prompt its room, at most a quarter of the window, never more
        than a record holds."""
        assert Window(8_000, 1 << 20).reply_tokens(6_000) == 8_000 - 6_000 - 125
        assert Window(8_000, 1 << 20).reply_tokens(100) == 2_000
        assert Window(1_000_000, 16_000).reply_tokens(1_000) == 1_000

    def test_message_over_half_is_refused(self) -> None:
        """A message over half the window is INVALID_ARGUMENT on the field given."""
        window, counter = Window(1_000, 1 << 20), Counter(Calibration())
        window.check_message(counter, "x" * 1_500, "content")
        with pytest.raises(InvalidArgument, match="half the model's window"):
            window.check_message(counter, "x" * 1_503, "content")


class TestPacking:
    def line(self, seq: int, tokens: int) -> Line:
        return Line(seq, "user", "x", tokens)

    def test_newest_first_into_at_most_n_chunks(self) -> None:
        """Lines are packed newest first; once the chunks are full the older ones are left."""
        packer = Packer(capacity=10, max_chunks=2)
        taken = [packer.add(self.line(seq, 4)) for seq in range(9, 0, -1)]
        assert taken == [True, True, True, True, False, False, False, False, False]
        assert packer.full and packer.first_seq == 6
        assert [[line.seq for line in chunk] for chunk in packer.in_order()] == [[6, 7], [8, 9]]

    def test_cut_fits(self) -> None:
        """A text over the tokens is cut, marked, to fit; a short one is kept."""
        counter = Counter(Calibration())
        assert cut(counter, "short", 10) == "short"
        long = cut(counter, "y" * 1_000, 50)
        assert counter.text(long) <= 50 and long.endswith(" […]")

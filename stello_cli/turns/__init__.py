"""Turns: `stello send` and `stello records` (`talk`), and `stello chat` (`chat`), which sends
its lines through `talk`'s turn."""

"""How the commands' output looks: colour, widths, cuts and the terminal's reads (`style`), and
gateway replies as lines of text (`format`)."""

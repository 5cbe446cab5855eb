"""`python -m stello` is the `stello` command."""

from stello.cli import main

main()

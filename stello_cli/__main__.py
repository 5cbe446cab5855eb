"""`python -m stello_cli` is the `stello` command."""

from stello_cli import main

main()

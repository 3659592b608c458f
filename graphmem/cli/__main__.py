"""``python -m graphmem.cli``: the command line."""

from graphmem.cli.main import main

main()

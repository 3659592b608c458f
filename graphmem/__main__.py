"""``python -m graphmem``: the command line, for environments whose scripts folder is not on
PATH (an MCP client's config, a cron job)."""

from graphmem.cli import main

main()

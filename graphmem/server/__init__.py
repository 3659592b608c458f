"""Network interfaces over GraphMemory: the HTTP API (:mod:`graphmem.server.http`) and the MCP
server (:mod:`graphmem.server.mcp`). Both need the ``server`` extra (FastAPI, uvicorn, mcp);
nothing here is imported by ``import graphmem``."""

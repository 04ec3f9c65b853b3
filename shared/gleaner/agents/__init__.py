"""The agent interface: Gleaner's copy as MCP tools and resources (``gleaner mcp``, ``/mcp`` under serve).

``tools`` answers each tool from the functions the CLI and ``/v1/`` already use (the back office's
API handlers, the text slicer, the citation store); ``server`` registers them on the official MCP
SDK's server; ``http`` serves that server's streamable-HTTP app inside ``gleaner serve``'s WSGI host.
Every call acts for the caller the token names, exactly as ``/v1/`` does (docs/agents.md).
"""

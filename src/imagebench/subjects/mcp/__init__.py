"""A case session served to an agent over MCP (the Model Context Protocol).

One model of "an MCP session of one case", shared by every route:

- :mod:`imagebench.subjects.mcp.tools`: :class:`AgentSession`, the tool functions over what the subject
  is shown (a :class:`~imagebench.case.session.Session` and the public part of its case, never the
  fixture or its truth), and the leavings it collects;
- :mod:`imagebench.subjects.mcp.transcript`: the record of every tool call (``transcript.json``);
- :mod:`imagebench.subjects.mcp.toolset`: the one table of tools (case and viewer tools) and their
  typed functions; :mod:`imagebench.subjects.mcp.results`: what each returns (its ``outputSchema``);
- :mod:`imagebench.subjects.mcp.view` and :mod:`imagebench.subjects.mcp.render`: the viewer tools'
  view (the session's own, or the panel's live viewer) and the pictures drawn from the session's layers;
- :mod:`imagebench.subjects.mcp.server`: the SDK's server over those tools, served on stdio, streamable
  HTTP on loopback, or a Unix socket bridged into a sandbox (:class:`SocketServer`).

``imagebench mcp serve CASE`` (:mod:`imagebench.cli.mcp`), ``run --subject-mcp`` (a ``command:``
subject gets the server for its session) and the bench panel's "Serve to an agent" all use them.
The ``mcp`` SDK is imported only by :mod:`imagebench.subjects.mcp.server` and the table it
registers (:mod:`imagebench.subjects.mcp.toolset`), so ``import imagebench`` stays light. See docs/agents.md.
"""

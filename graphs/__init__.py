"""One module per method; each exports a compiled LangGraph ``graph`` (names and descriptions: ``agent.registry``)."""

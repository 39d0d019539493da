"""Data shipped in the package as ``agent.data``: the demo corpus and few-shot demonstrations (``agent.resources``)."""

"""The prompt files (one per prompt); shipped in the package as ``agent.prompts`` and read by ``agent.resources``."""

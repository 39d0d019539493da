"""Typed errors: each says what was wrong and what to do. The CLI prints them as one line."""


class AgentError(Exception):
    """Base class for every error a user can act on."""


class InvalidQuestionError(AgentError, ValueError):
    """The question is empty or too long."""


class InvalidPassagesError(AgentError, ValueError):
    """The passages a caller gave a run are missing, too many, empty or too long."""


class UnknownMethodError(AgentError, ValueError):
    """No graph of that name."""


class CollectionError(AgentError):
    """The vector collection is missing or empty."""


class StoreError(AgentError):
    """The store's database cannot be reached or used (the URL's host is named, never its password)."""


class IngestError(AgentError):
    """The corpus file could not be ingested; the collection was left as it was."""


class LLMError(AgentError):
    """The LLM could not be reached, timed out or kept returning unusable output."""


class ContextOverflowError(LLMError):
    """A prompt and its reply did not fit the model's context window; ``excess``: the tokens the prompt must lose (None
    where the endpoint did not say)."""

    def __init__(self, message: str, excess: int | None = None) -> None:
        super().__init__(message)
        self.excess = excess


class LLMUnavailableError(LLMError):
    """The LLM endpoint is down, refuses connections or times out."""


class LLMCrashError(LLMUnavailableError):
    """The embedded LLM server process died (a signal or an exit code) before or during a call."""


class ModelFileError(AgentError):
    """A part of the local GGUF model is missing or corrupt."""


class ConfigError(AgentError, ValueError):
    """A setting or per-run option has an invalid value."""


class ReplayError(AgentError):
    """A stored run cannot be replayed from the node asked for (it never reached it)."""


class UnknownThreadError(AgentError, LookupError):
    """No clarify thread of that id waits for a choice: never started, or already answered."""


class ThreadBusyError(AgentError):
    """Another request is already resuming this clarify thread: exactly one resume runs (HTTP 409)."""

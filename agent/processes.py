"""Child processes we start (the LLM server, the Chroma server) die with us."""

from __future__ import annotations

import signal


def die_with_parent() -> None:
    """In the server process: get SIGKILL when our process dies, even by a signal that skips atexit (Linux).

    SIGKILL, not SIGTERM: uvicorn's graceful shutdown waited on background tasks for good once, leaving an orphan.

    The kernel ties this to the *thread* that forked, so servers are started from the server's owner, a thread that lives as
    long as the process (LangGraph's worker threads come and go).
    """
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass

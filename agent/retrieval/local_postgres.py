"""A PostgreSQL with pgvector on loopback, from the binaries of PyPI ``pgserver`` (PostgreSQL 16 + pgvector 0.6).

Debian's PostgreSQL has no pgvector package; ``pgserver``'s wheel bundles both and installs on a fresh machine. We
use its binaries only (``initdb``, ``pg_ctl``), listening on 127.0.0.1 at a port, so any process — tests, two
``serve`` replicas, ``psql`` — reaches it by URL. PostgreSQL refuses to run as root; as root the cluster runs as the
system user ``pgserver`` (created once, as the package itself does). Trust authentication on loopback: a development
and test database, not a production one (see docs/deploy.md).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from agent.errors import StoreError

SYSTEM_USER = "pgserver"


def binaries() -> Path:
    """The ``bin`` folder of the ``pgserver`` wheel's PostgreSQL."""
    try:
        import pgserver
    except ImportError:
        raise StoreError(
            "a local PostgreSQL needs the package 'pgserver' (pip install pgserver), or point AMBIGQA_DATABASE_URL "
            "at a PostgreSQL with pgvector"
        ) from None
    return Path(pgserver.__file__).parent / "pginstall" / "bin"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_owner() -> dict:
    """subprocess arguments that run a PostgreSQL binary as a non-root user when we are root."""
    if os.geteuid() != 0:
        return {}
    from pgserver.utils import ensure_user_exists

    ensure_user_exists(SYSTEM_USER)
    return {"user": SYSTEM_USER}


def _give_to_owner(path: Path) -> None:
    if os.geteuid() == 0:
        shutil.chown(path, SYSTEM_USER, SYSTEM_USER)
        for parent in path.parents:  # the server must traverse to its folder
            parent.chmod(parent.stat().st_mode | 0o011)


@dataclass
class LocalPostgres:
    data: Path
    port: int

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def stop(self) -> None:
        subprocess.run(
            [str(binaries() / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"],
            capture_output=True, check=False, timeout=60, **_as_owner(),
        )  # fmt: skip


def start(data: Path, port: int = 0) -> LocalPostgres:
    """Initialise ``data`` (once) and start PostgreSQL on 127.0.0.1:``port`` (0: a free one) with pgvector enabled."""
    bin_dir, owner = binaries(), _as_owner()
    data = data.resolve()  # the server runs in its data folder: a relative socket folder would not be found there
    data.mkdir(parents=True, exist_ok=True)
    _give_to_owner(data)
    if not (data / "PG_VERSION").exists():
        _run([str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "--encoding=utf8"], owner)
    port = port or _free_port()
    options = f"-h 127.0.0.1 -p {port} -k {data} -c max_connections=200 -c shared_buffers=256MB"
    _run([str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(data / "log"), "-w", "start"], owner)
    _run([str(bin_dir / "psql"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-d", "postgres", "-qc",
          "CREATE EXTENSION IF NOT EXISTS vector"], owner)  # fmt: skip
    return LocalPostgres(data, port)


def _run(command: list[str], owner: dict) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False, **owner)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise StoreError(f"{Path(command[0]).name} failed ({done.returncode}): {' / '.join(tail)}")

"""A writer process killed right after its acknowledged writes, never closed."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap


def ids_written_then_killed(body: str) -> list[str]:
    """Run ``body`` (Python, dedented; it binds ``made`` to the memories it wrote) in a new
    process that is then killed with SIGKILL; the ids of ``made``."""
    script = (
        "import os, signal\n"
        + textwrap.dedent(body)
        + '\nprint(",".join(m.id for m in made), flush=True)'
        + "\nos.kill(os.getpid(), signal.SIGKILL)  # acknowledged, never closed\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == -signal.SIGKILL, run.stderr
    return run.stdout.strip().split(",")

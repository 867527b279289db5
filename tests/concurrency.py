"""Helpers for the tests of threads and fork: many threads at once, and a script that forks in a fresh process."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Callable


def run_threads(work: Callable[[int], None], count: int = 8) -> None:
    """``work(0)`` ... ``work(count - 1)`` in threads at once, Python switching between them as often as it can."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)


def script_output(code: str, timeout: float = 120) -> str:
    """What ``code`` prints, run in a fresh interpreter (a fork there does not copy the test process's threads);
    the script must succeed."""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()

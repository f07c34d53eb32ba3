"""The ``staleguard`` command of the wheel: the CLI's own Rust code (``staleguard_cli::run``),
so ``staleguard demo``, ``staleguard proxy`` and ``staleguard mcp -- npx @playwright/mcp``
behave as the binary built with cargo does."""

from __future__ import annotations

import signal
import sys

from . import _native


def main() -> None:
    """Run the command line in ``sys.argv`` and exit with the command's exit code."""
    # Python's SIGINT handler only sets a flag for the interpreter, which does not look at it
    # while the Rust code runs without the GIL: Ctrl-C would not stop `mcp`, and would raise
    # KeyboardInterrupt after `proxy` shut down on it. The default disposition is the
    # binary's: `proxy` installs its own handler (a graceful shutdown), the rest end.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.stdout.flush()
    sys.exit(_native.main(sys.argv))

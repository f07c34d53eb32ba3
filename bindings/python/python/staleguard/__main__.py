"""``python -m staleguard``: the ``staleguard`` command."""

from ._cli import main

main()

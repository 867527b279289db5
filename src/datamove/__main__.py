"""``python -m datamove``: the ``datamove`` command (see :mod:`datamove.cli.app`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())

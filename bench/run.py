"""Run datamove's benchmark suite: ``python bench/run.py [--quick] [--json FILE] [--peers ...]``.

The suite lives in :mod:`datamove.benchmarks.suite` so ``datamove bench`` runs the same thing.
"""

import sys

from datamove.benchmarks.suite import main

if __name__ == "__main__":
    sys.exit(main())

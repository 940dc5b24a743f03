"""``python -m mlprof``: the same command line as ``mlprof``."""

import sys

from mlprof.cli.main import main

if __name__ == "__main__":
    sys.exit(main())

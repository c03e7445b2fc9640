"""PyInstaller's entry point for the bundle: the same `hearth` console script."""

import sys

from app.launcher import main

if __name__ == "__main__":
    sys.exit(main())

"""Command line: ``python -m dp_glm_sklearn demo``."""

import sys

from ._demo import main

if __name__ == "__main__":
    sys.exit(main())

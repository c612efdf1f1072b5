"""``python -m habitat.cli``: the same as ``python -m habitat``."""
import sys

from habitat.cli import main

sys.exit(main())

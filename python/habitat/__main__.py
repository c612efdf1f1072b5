"""``python -m habitat``: the command line (see habitat.cli)."""
import sys

from habitat.cli import main

sys.exit(main())

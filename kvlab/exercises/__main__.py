"""``python -m kvlab.exercises [--check] [NOTEBOOK ...]``: see :mod:`kvlab.exercises.notebook`."""
import sys

from .notebook import main

sys.exit(main(sys.argv[1:]))

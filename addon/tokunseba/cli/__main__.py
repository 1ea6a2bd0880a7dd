"""``python -m tokunseba.cli``: the same command as the ``tokunseba`` script."""

import sys

from .main import main

sys.exit(main())

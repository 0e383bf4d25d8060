"""``python -m tshtrain.cli ...``: the same as the ``tshtrain`` command."""

import sys

from tshtrain.cli import main

sys.exit(main())

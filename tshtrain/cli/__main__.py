"""``python -m tshtrain.cli ...``: the same as the ``tshtrain`` command.

A rank of a data-parallel run (launched by torchrun, ``tshtrain train --nproc N``) leaves with
``os._exit`` once its command returned, after flushing its streams and logging: during the interpreter's
finalization gloo's worker threads free the last collective and need the GIL, which aborted (SIGABRT)
about half of the 2-rank runs after they had finished and written everything. The trainer and the
CLI have closed every logger, file and process group by then.
"""

import logging
import os
import sys

from tshtrain.cli import main
from tshtrain.distributed import launched_by_torchrun

code = main()
if launched_by_torchrun():
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code)
sys.exit(code)

"""``python -m tshtrain.cli ...``: the same as the ``tshtrain`` command.

A rank of a data-parallel run (launched by torchrun, ``tshtrain train --nproc N``) leaves like any
other process: ``tshtrain train`` closes its :class:`~tshtrain.distributed.DistributedContext`, which
destroys the process group and joins gloo's worker threads before the interpreter finalizes (the
abort at exit this once needed ``os._exit`` for is explained in :mod:`tshtrain.distributed`).
"""

import sys

from tshtrain.cli import main

sys.exit(main())

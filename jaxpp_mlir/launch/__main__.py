"""``python -m jaxpp_mlir.launch``: the launcher of ``jaxpp_mlir.distributed.launch``."""

import sys

from jaxpp_mlir.distributed.launch import main

sys.exit(main())

"""``python -m fedcomp.cli`` is the ``fedcomp`` command (as ``python -m fedcomp``)."""

import sys

from . import main

sys.exit(main())

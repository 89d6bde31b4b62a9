"""``python -m difgen`` is the same as the ``difgen`` console script."""

from __future__ import annotations

import sys

from difgen.cli import main

sys.exit(main())

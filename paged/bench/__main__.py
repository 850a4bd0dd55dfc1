"""`python -m paged.bench ...`: see paged/bench/__init__.py."""

import sys

from . import main

sys.exit(main())

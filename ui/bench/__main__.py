"""`python -m ui.bench …` (see ui/bench/__init__.py)."""

from . import main

raise SystemExit(main())

"""``python -m scenarios.worker``."""

import sys

from scenarios.worker.loop import main

sys.exit(main())

"""`python -m streaming`: the same as `kcsim`."""

import sys

from streaming.cli import main

sys.exit(main())

"""`python -m trainscale` is the same as the `trainscale` console script."""

import sys

from trainscale.cli import main

sys.exit(main())

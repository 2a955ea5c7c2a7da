"""``python -m bastion``: the ``bastion`` command."""

import sys

from tasks.cli import main

sys.exit(main())

"""``python -m bastion``: the ``bastion`` command."""

import sys

from bastion.tasks.cli import main

sys.exit(main())

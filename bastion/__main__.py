"""``python -m bastion``: the ``bastion`` command."""

import sys

from bastion.tasks.entry import main

sys.exit(main())

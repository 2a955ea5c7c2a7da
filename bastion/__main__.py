"""``python -m bastion``: the ``bastion`` command."""

import sys

from bastion.tasks.commands.entry import main

sys.exit(main())

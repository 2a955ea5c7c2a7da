"""The names vulture (``vulture --min-confidence 80 readers tasks bastion
tests/vulture_whitelist.py``, run by tests/test_dead_code.py) would take for dead code, each
with why it is not.  Vulture only parses this file: a bare name here marks that name used."""

exc  # __exit__(self, *exc): the context-manager protocol hands the exception over; ignored
option_string  # argparse.Action.__call__(parser, namespace, values, option_string): argparse's

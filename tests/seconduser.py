"""The second user of the tests that play a hostile co-user (test_security, test_walk_race)."""

from __future__ import annotations

import pwd
import subprocess

TEST_USER = "bastion-test-user"


def second_user() -> tuple[int, int]:
    """The uid and gid of the second user (created when missing)."""
    try:
        pw = pwd.getpwnam(TEST_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                        "/usr/sbin/nologin", TEST_USER], check=True, capture_output=True)
        pw = pwd.getpwnam(TEST_USER)
    return pw.pw_uid, pw.pw_gid

"""The command's name in its messages, and the errors a command reports to the user."""
from __future__ import annotations

PROG = "habitat"


class UserError(Exception):
    """Bad input from the user: reported as one line on stderr, exit code 1."""

    exit_code = 1


class UsageError(UserError):
    """Arguments that do not go together: exit code 2, like argparse's own errors."""

    exit_code = 2

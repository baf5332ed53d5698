"""``ConfigError``: a bad config value, whose message is one line naming the key and the fix.

Raised by the job spec (``study.job.jobspec``), the plugins (``study.job.plugins``), the identity and the
cross-field checks; the commands print it as one line and exit 2.  Imports nothing.
"""


class ConfigError(ValueError):
    """A bad config value: the message is one line naming the key and the fix."""

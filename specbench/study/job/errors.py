"""``ConfigError``: a bad config value, whose message is one line naming the key and the fix; and the typed
reads of one value that raise it (``as_int``, ``as_float``, ``as_bool``, ``as_choice``, ``as_names``).

Raised by the job spec (``study.job.jobspec``), the plugins (``study.job.plugins``), the identity and the
cross-field checks; the commands print it as one line and exit 2.  Imports nothing.
"""


class ConfigError(ValueError):
    """A bad config value: the message is one line naming the key and the fix."""


# typed reads: every failure names its key
# ``need``: what the value must be, said in place of the range (``speed_until``: a Unix time in seconds)
def as_int(
    value, key: str, minimum: int | None = None, fix: str = "", most: int = 2**40, need: str = ""
) -> int:  # torch seeds < 2**63
    ok = isinstance(value, int) and not isinstance(value, bool)
    if isinstance(value, float) and value.is_integer():
        value, ok = int(value), True
    if not ok or (minimum is not None and value < minimum) or value > most:
        need = need or "an integer" + (f" >= {minimum}" if minimum is not None else "") + f" and <= {most}"
        raise ConfigError(f"{key}={value!r}: must be {need}{'; ' + fix if fix else ''}")
    return value


def as_float(value, key: str, lo: float, hi: float | None, fix: str, above: bool = False, need: str = "") -> float:
    """A number in [``lo``, ``hi``] (``lo`` excluded with ``above``; ``hi`` None: no upper bound), never NaN."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{key}={value!r}: must be {need or 'a number'}; {fix}")
    if (value <= lo if above else value < lo) or (hi is not None and value > hi) or value != value:
        rng = f"in {'(' if above else '['}{lo}, {hi}]" if hi is not None else f"{'>' if above else '>='} {lo}"
        raise ConfigError(f"{key}={value!r}: must be {need or rng}; {fix}")
    return float(value)


def as_bool(value, key: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{key}={value!r}: must be true or false")
    return value


def as_names(value, key: str, what: str = "mode names", fix: str = "") -> tuple:
    """A list of distinct names (a single name or null allowed); ``what`` they name, ``fix`` the example."""
    items = [] if value is None else [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(x, str) and x for x in items) or len(set(items)) != len(items):
        raise ConfigError(f"{key}={value!r}: must be a list of distinct {what}, {fix or f'e.g. {key}=[block]'}")
    return tuple(items)


def as_choice(value, key: str, valid) -> str:
    if str(value) not in valid:
        raise ConfigError(f"{key}={value!r}: must be one of {', '.join(valid)}")
    return str(value)

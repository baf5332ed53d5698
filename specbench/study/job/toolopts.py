"""The study tools' own top-level keys (``+costs_repeats=3``, ``+speed_rounds=auto``, ``+llamacpp_n_max=[4]``), checked
in one place: the declared table ``OPTIONS`` (each key's kind, default, range and fix), read with ``errors``' typed
reads (``value(extra, key)``: a one-line ``ConfigError`` naming the key and the fix), and the rules between keys and
inside a list's items (``tree_candidates``, ``draft_grid``, ``draft_candidates``, ``ngram_grid``).

Which tool takes which keys is ``TOOLS`` (``keys(tool)``: what ``argv.check_argv`` accepts as ``+`` keys);
``check(extra, tool)`` reads every key a tool takes, so a bad value is refused before any model loads or server
starts.  The values are read, never written back: ``JobSpec.extra`` stays as given (the config hash covers it).
``Option`` and ``read`` also declare and read the job's own top-level keys (``jobspec.TOP``).

Imports: ``study.job.errors`` only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import ConfigError, as_bool, as_choice, as_float, as_int, as_names

MAX_ROUNDS = 1000  # rounds of every candidate over every prompt: past this a typo, not a benchmark
NGRAM_MOST = 1024  # llama.cpp's bound on ngram-simple's size N and M (common/arg.cpp)
N_MAX_MOST = 64  # the acceptance grid's longest draft


@dataclass(frozen=True)
class Option:
    """One key: ``kind`` int, float, bool, text, choice, names (a list of distinct names) or items (parsed by the
    function its comment names: a rule inside each item and between items); ``many``: a list of
    such values (a single value read as a list of one); ``words``: values allowed beside the kind's (``auto``);
    ``empty``: the fix when an empty list is given (None: an empty list is allowed); ``above``: ``lo`` excluded;
    ``need``: what the value must be, in the refusal, in place of the range."""

    kind: str
    default: Any = None
    lo: float | None = None
    hi: float | None = None
    fix: str = ""
    words: tuple[str, ...] = ()
    many: bool = False
    empty: str | None = None
    above: bool = False
    need: str = ""


LLAMA_CTX = Option("int", 4096, 1, 2**24, "the servers' context in tokens, e.g. +llamacpp_ctx=4096")
OPTIONS: dict[str, Option] = {
    "results_dir": Option("text", "results"),
    # study.tools.costs
    "costs_repeats": Option("int", 7, 1, 10**4, "timed forwards per shape, e.g. +costs_repeats=7"),
    "costs_kv_lens": Option(
        "int", [128, 512], 1, 10**9, "e.g. '+costs_kv_lens=[128,512]'", many=True, empty="give one KV length or more"
    ),  # a KV length: bounded by the models' positions too (costs.check_positions)
    "costs_pairs": Option("names", None, fix="conf/pair names, e.g. +costs_pairs=[qwen_coder]", empty="names none"),
    "costs_dtypes": Option("names", None, fix="e.g. +costs_dtypes=[bfloat16,float32]", empty="names none"),
    "costs_merge": Option("text"),
    "costs_max_tokens": Option("int", None, 1, 2**40, "or null for every width (e.g. +costs_max_tokens=17)"),
    # study.tools.speed and speed_llamacpp (study.tools.speedloop)
    "speed_candidates": Option("items", "auto"),  # auto, schedule or TREE/BUDGET items: ``tree_candidates``
    "speed_rounds": Option("int", 1, 1, MAX_ROUNDS, "e.g. +speed_rounds=2, or auto", words=("auto",)),
    "speed_max_rounds": Option("int", 3, 1, MAX_ROUNDS, "e.g. +speed_max_rounds=2"),
    "speed_until": Option(
        "float", None, 0, None, "e.g. +speed_until=$(date +%s)", above=True, need="a Unix time in seconds"
    ),
    "speed_merge": Option("text"),
    # study.tools.speed_llamacpp, accept_llamacpp and accept_ngram
    "llamacpp_candidates": Option("items", ["4/0.75"], many=True),  # N_MAX/P_MIN items: ``draft_candidates``
    "llamacpp_n_min": Option("int", 0, 0, 2**40, "e.g. +llamacpp_n_min=0"),
    "llamacpp_n_max": Option(
        "int", [1, 2, 3, 4, 6, 8, 12, 16], 1, N_MAX_MOST, "a draft length, e.g. 4", many=True, empty=""
    ),
    "llamacpp_p_min": Option("float", [0.0, 0.5, 0.75, 0.9], 0.0, 1.0, "a probability, e.g. 0.75", many=True, empty=""),
    "llamacpp_ngram": Option("items", None, many=True, empty=""),  # N/M items: ``ngram_grid``
    "llamacpp_target": Option("text"),
    "llamacpp_draft": Option("text"),
    "llamacpp_prompts": Option("choice", "ids", words=("ids", "text")),
    "llamacpp_ctx": LLAMA_CTX,
    "llamacpp_replay_only": Option("bool", False),
    "llamacpp_threads": Option("int", None, 1, 1024, "e.g. 1 on a busy machine"),
}
SPEED = ("speed_rounds", "speed_max_rounds", "speed_until")
LLAMA = ("llamacpp_target", "llamacpp_draft", "llamacpp_ctx")
TOOLS: dict[str, tuple[str, ...]] = {
    "costs": ("results_dir", *(k for k in OPTIONS if k.startswith("costs_"))),
    "speed": ("results_dir", "speed_candidates", *SPEED, "speed_merge"),
    "speed_llamacpp": ("results_dir", *SPEED, "llamacpp_candidates", "llamacpp_n_min", *LLAMA, "llamacpp_prompts"),
    "accept_llamacpp": ("results_dir", "llamacpp_n_max", "llamacpp_p_min", "llamacpp_n_min", *LLAMA)
    + ("llamacpp_replay_only", "llamacpp_ngram", "llamacpp_threads"),
}


def keys(tool: str) -> tuple[str, ...]:
    """The top-level keys ``tool`` takes beside conf/config.yaml's (``argv.check_argv``'s ``extra``)."""
    return TOOLS[tool]


def read(o: Option, value, key: str):
    """One value of option ``o`` (a list's item, or a scalar), read by its kind with ``errors``' typed reads."""
    if isinstance(value, str) and value in o.words and o.kind != "choice":
        return value
    if o.kind == "int":
        return as_int(value, key, None if o.lo is None else int(o.lo), o.fix, int(o.hi or 2**40), o.need)
    if o.kind == "float":
        return as_float(value, key, float(o.lo or 0), o.hi, o.fix, o.above, o.need)
    if o.kind == "bool":
        return as_bool(value, key)
    if o.kind == "choice":
        return as_choice(value, key, o.words)
    return value if value is None or o.kind == "items" else str(value)


def value(extra: dict, key: str, default: Any = None):
    """``extra[key]`` read by its declared option (``default``, else the option's, where not given); a list
    option as a list (its items each read, an empty one refused where the option says)."""
    o = OPTIONS[key]
    given = extra.get(key)
    if given is None:
        given = o.default if default is None else default
        return list(given) if isinstance(given, list) else given
    if o.kind == "names":
        if isinstance(given, (list, tuple)) and not given and o.empty is not None:
            raise ConfigError(f"{key}=[]: {o.empty}; leave it out or list some ({o.fix})")
        return list(as_names(given, key, "names", o.fix))
    if not o.many:
        return read(o, given, key)
    items = list(given) if isinstance(given, (list, tuple)) else [given]
    if not items and o.empty is not None:
        raise ConfigError(f"{key}={given!r}: {o.empty or 'give a list of distinct values'}; {o.fix}".rstrip("; "))
    return [read(o, v, key) for v in items]


def check(extra: dict, tool: str) -> None:
    """Every key ``tool`` takes read (``value``) and its lists' items parsed: a bad one refused in one line."""
    for key in keys(tool):
        value(extra, key)
    if tool == "speed":
        tree_candidates(extra)
    elif tool == "speed_llamacpp":
        draft_candidates(extra)
    elif tool == "accept_llamacpp":  # the n-gram grid where given, else the draft grid
        ngram_grid(extra) if "llamacpp_ngram" in extra else draft_grid(extra)


def tree_candidates(extra: dict) -> str | list[tuple[str, int]]:
    """``speed_candidates``: ``auto``, ``schedule``, or its TREE/BUDGET items as (tree, budget), each once."""
    given = extra.get("speed_candidates", "auto")
    if given in ("auto", "schedule"):  # schedule: results.schedule.ROSTER
        return given
    items = list(given) if isinstance(given, (list, tuple)) else [given]
    if not items:
        raise ConfigError("speed_candidates: empty; give auto or a list of TREE/BUDGET")
    parsed = []
    for item in items:
        tree, _, budget = str(item).partition("/")
        if not tree or not budget.isdigit() or int(budget) < 1:
            raise ConfigError(
                f"speed_candidates: {item!r} is not TREE/BUDGET (e.g. '+speed_candidates=[chain/4,binary/3]')"
            )
        parsed.append((tree, int(budget)))
    twice = [f"{t}/{b}" for k, (t, b) in enumerate(parsed) if (t, b) in parsed[:k]]
    if twice:
        raise ConfigError(f"speed_candidates: {twice[0]} is listed twice; give each TREE/BUDGET once")
    return parsed


def n_max_p_min(item, n_min: int) -> tuple[int, float]:
    """'4/0.75' -> (4, 0.75): N_MAX >= max(1, ``n_min``), 0 <= P_MIN <= 1 (``llamacpp_candidates``' item)."""
    n, _, p = str(item).partition("/")
    try:
        n_max, p_min = int(n), float(p)
    except ValueError:
        n_max, p_min = 0, -1.0
    if n_max < 1 or not 0 <= p_min <= 1 or n_min > n_max:
        raise ConfigError(
            f"llamacpp_candidates: {item!r} is not N_MAX/P_MIN with N_MAX >= max(1, llamacpp_n_min={n_min}) and "
            "0 <= P_MIN <= 1 (e.g. '+llamacpp_candidates=[4/0.75,8/0.75]')"
        )
    return n_max, p_min


def draft_candidates(extra: dict) -> tuple[int, list[tuple[int, float]]]:
    """(``llamacpp_n_min``, each ``llamacpp_candidates`` item as (n_max, p_min), each once; ``[]``: none)."""
    n_min = value(extra, "llamacpp_n_min")
    given = value(extra, "llamacpp_candidates")
    parsed = [n_max_p_min(i, n_min) for i in given]
    if len(set(parsed)) < len(parsed):
        raise ConfigError("llamacpp_candidates: one N_MAX/P_MIN listed twice; give each once")
    return n_min, parsed


REPLAY_N_MIN = 1  # the replay knows a chain only along its continuation: exact for n_min 0 or 1


def draft_grid(extra: dict) -> list[tuple[int, float, int]]:
    """Every (n_max, p_min, n_min) of ``llamacpp_n_max`` x ``llamacpp_p_min`` (each list distinct, each n_max >=
    max(1, ``llamacpp_n_min``), n_min at most ``REPLAY_N_MIN``)."""
    n_min = as_int(extra.get("llamacpp_n_min", 0), "llamacpp_n_min", 0, "the replay is exact for 0 or 1", REPLAY_N_MIN)
    n_max = OPTIONS["llamacpp_n_max"]
    lists = {}
    for key in ("llamacpp_n_max", "llamacpp_p_min"):
        given, default = extra.get(key, OPTIONS[key].default), OPTIONS[key].default
        items = value(extra, key)
        if len(set(items)) < len(items):
            raise ConfigError(f"{key}={given!r}: give a list of distinct values, e.g. +{key}={list(default)}")
        lists[key] = items
    for v in lists["llamacpp_n_max"]:  # n_min's floor: a rule between two keys
        as_int(v, "llamacpp_n_max", max(1, n_min), n_max.fix, N_MAX_MOST)
    return [(n, p, n_min) for n in lists["llamacpp_n_max"] for p in lists["llamacpp_p_min"]]


DRAFT_KEYS = ("llamacpp_n_max", "llamacpp_p_min", "llamacpp_n_min")


def n_m(item) -> tuple[int, int]:
    """'2/8' -> (2, 8): 1 <= N <= M <= ``NGRAM_MOST`` (``llamacpp_ngram``'s item)."""
    n, _, m = str(item).partition("/")
    try:
        size_n, size_m = int(n), int(m)
    except ValueError:
        size_n, size_m = 0, 0
    if not 1 <= size_n <= size_m <= NGRAM_MOST:
        raise ConfigError(
            f"llamacpp_ngram: {item!r} is not N/M with 1 <= N <= M <= {NGRAM_MOST} (ngram-simple never drafts with "
            "M < N; e.g. '+llamacpp_ngram=[2/4,4/8]')"
        )
    return size_n, size_m


def ngram_grid(extra: dict, default=()) -> list[tuple[int, int]]:
    """Every ``llamacpp_ngram`` N/M (``default`` where not given) as (n, m), each once; the draft grid's keys
    (``DRAFT_KEYS``) are refused beside it."""
    given = [k for k in DRAFT_KEYS if k in extra]
    if given:
        raise ConfigError(
            f"{given[0]}: a draft-simple key, but this run measures llama.cpp's n-gram settings (llamacpp_ngram given, "
            "or a pair without a draft model)"
        )
    items = extra.get("llamacpp_ngram", list(default))
    items = list(items) if isinstance(items, (list, tuple)) else [items]
    out = [n_m(i) for i in items]
    if not out or len(set(out)) < len(out):
        raise ConfigError(f"llamacpp_ngram={items!r}: give a list of distinct N/M, e.g. +llamacpp_ngram=[2/4,4/8]")
    return out

"""llama-server's per-response counts (``import_metrics --engine llamacpp`` on JSON lines).

Each line is one response of ``/completion`` (or a row ``study.tools.llamaserver.decode`` wrote):
an object whose ``timings`` hold ``predicted_n`` (tokens generated) and, where the request drafted,
``draft_n`` (draft tokens proposed) and ``draft_n_accepted`` (tools/server/server-common.cpp: both
absent when nothing was drafted).  They give the acceptance rate (accepted / drafted, summed over
responses) and no step count.  Each count must be a whole number >= 0, accepted <= drafted and
accepted <= generated; anything else is one line naming the file and line.
"""

from __future__ import annotations

import json
import math

from ...core.jsonl import json_objects

FIX = "give llama-server's /completion responses (or the rows llamaserver.decode wrote), one JSON object per line"


def _count(timings: dict, key: str, where: str) -> int:
    v = timings.get(key, 0)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 or v != int(v):
        raise ValueError(f"{where}: timings.{key} = {v!r} is not a count (a whole number >= 0); {FIX}")
    return int(v)


def response_counts(obj: dict, where: str) -> tuple[int, int, int]:
    """(generated, drafted, accepted) of one response, checked."""
    timings = obj.get("timings")
    if not isinstance(timings, dict) or "predicted_n" not in timings:
        raise ValueError(f"{where}: no timings.predicted_n: not a llama-server response; {FIX}")
    generated, drafted, accepted = (_count(timings, k, where) for k in ("predicted_n", "draft_n", "draft_n_accepted"))
    if accepted > drafted:
        raise ValueError(f"{where}: draft_n_accepted {accepted} > draft_n {drafted}; {FIX}")
    if accepted > generated:
        raise ValueError(f"{where}: draft_n_accepted {accepted} > predicted_n {generated} tokens generated; {FIX}")
    return generated, drafted, accepted


def from_timings(text: str, path: str) -> dict:
    """The served row's fields from the responses in ``text`` (see the module's docstring)."""
    like = '{"timings": {"predicted_n": 128, "draft_n": 96, "draft_n_accepted": 80}}'
    counts = [response_counts(obj, f"{path}:{n}") for n, obj in json_objects(text.splitlines(), path, FIX, like)]
    if not counts:
        raise ValueError(f"{path}: no responses; {FIX}")
    drafted, accepted = sum(c[1] for c in counts), sum(c[2] for c in counts)
    if not drafted:
        raise ValueError(f"{path}: no response drafted a token (no timings.draft_n > 0): not a speculative server")
    return {
        "n_requests": len(counts),
        "acceptance_rate": accepted / drafted,
        "marginal_acceptance": "",
        "source_counts": json.dumps({"draft_n": drafted, "draft_n_accepted": accepted}),
    }

"""The draft model's side of a batched run: every row's draft cache in one ``kv.BatchKV``,
and the rendezvous that turns the rows' draft forwards into one batched forward.

A ``ModelDrafter`` is a row of a ``DraftGroup`` (its own one-row group when none is
given).  Its tree-growing code (static shapes, EAGLE-2, merged) is unchanged: it
calls ``forward(row, parents, tokens, start)`` once per depth.  During a batched
draft phase (``run``) each row drafts in its own thread; a forward waits until every
row still drafting has asked for one (or finished), then ONE batched forward serves
them all (rows with nothing to forward ride along as padding).  Outside a phase, or
with one row, a forward runs at once.  ``select`` (a commit keeping the accepted
path) and ``drop`` (a finished row) wait for the next forward or ``add``, so the
cache is compacted once for all rows.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence

import torch

from ..core.kv import BatchKV

KEEP_ALL = None


class DraftGroup:
    def __init__(self, model):
        self.model, self.kv = model, BatchKV(model)
        self.ids: list[int] = []              # row id of each cache row, in cache order
        self.pending: dict[int, list[int] | str] = {}   # row id -> kept logical slots, or "drop"
        self.requests: dict[int, tuple] = {}
        self.results: dict[int, object] = {}
        self.active, self.next_id = 0, 0
        self.forwards = 0                     # batched draft forwards run (a profile count)
        self.cv = threading.Condition()

    # -- rows -------------------------------------------------------------
    def add(self, prompt_ids: Sequence[int]) -> int:
        """A new row holding every prompt token but the last; returns its id."""
        with self.cv:
            self.flush()
            self.kv.add(prompt_ids)
            self.ids.append(self.next_id)
            self.next_id += 1
            return self.ids[-1]

    def select(self, row: int, slots: Sequence[int]) -> None:
        """Keep only these of the row's cached tokens (at the next forward)."""
        self.pending[row] = list(slots)

    def drop(self, row: int) -> None:
        self.pending[row] = "drop"

    def flush(self) -> None:
        if not self.pending:
            return
        keep = [(b, range(self.kv.lens[b]) if self.pending.get(r, KEEP_ALL) is KEEP_ALL else self.pending[r])
                for b, r in enumerate(self.ids) if self.pending.get(r) != "drop"]
        self.ids = [self.ids[b] for b, _ in keep]
        self.pending = {}
        self.kv.keep(keep)

    # -- forwards ---------------------------------------------------------
    def forward(self, row: int, parents: Sequence[int], tokens: Sequence[int], start: int) -> torch.Tensor:
        """Logits [len(parents) - start, V] of the row's new tree nodes ``start:`` (see
        ``BatchKV.forward``); the nodes stay in the row's cache."""
        with self.cv:
            self.requests[row] = (list(parents), [int(t) for t in tokens], int(start))
            if len(self.requests) >= max(self.active, 1):
                self.serve()
            while row not in self.results:
                self.cv.wait()
            out = self.results.pop(row)
        if isinstance(out, BaseException):
            raise out
        return out

    def serve(self) -> None:
        """Run the waiting requests as one forward (the caller holds ``cv``)."""
        requests, self.requests = self.requests, {}
        try:
            self.flush()
            trees = [requests.get(r, ([], [], 0)) for r in self.ids]
            logits = self.kv.forward(trees)
            self.forwards += 1
            news = [len(p) - s for p, _, s in trees]
            for b, r in enumerate(self.ids):
                if r in requests:
                    self.results[r] = logits[b, :news[b]]
            self.kv.keep([(b, range(n + new)) for b, (n, new) in enumerate(zip(self.kv.lens, news))])
        except BaseException as e:      # every waiting row gets the error, none waits forever
            self.results.update({r: e for r in requests})
        self.cv.notify_all()

    def leave(self) -> None:
        """A row finished drafting for this phase."""
        with self.cv:
            self.active -= 1
            if self.requests and len(self.requests) >= self.active:
                self.serve()

    def run(self, fns: Sequence[Callable[[], object]]) -> list:
        """Call every row's ``fn`` (one draft each), their forwards batched; results in order."""
        if len(fns) == 1:
            return [fns[0]()]
        self.active = len(fns)

        def member(fn):
            try:
                return fn()
            finally:
                self.leave()
        with ThreadPoolExecutor(len(fns)) as pool:
            futures = [pool.submit(member, fn) for fn in fns]
            return [f.result() for f in futures]

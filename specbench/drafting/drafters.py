"""Drafters: grow a DraftTree for the current step, level by level.

Every drafter has the same three calls, used by the decode loop (``engine``):

    reset(prompt_ids)                 new prompt
    draft(policy, rule, rng)          -> a level generator (``levels``): it yields the nodes it
                                         needs scored at each depth, receives their logits, and
                                         returns this step's DraftTree (policy: ``policies``;
                                         rule: how the verify mode wants children chosen)
    commit(tree, path, next_token)    the verifier's verdict

The model drafter grows the tree level by level: one draft forward per depth
covers the whole frontier (tree mask + the draft's slot KV cache), so it never
re-runs the prefix and makes no forward per node; the loop batches the forwards
of every row (``levels.run_levels``).  Dynamic shapes (EAGLE-2) and other drafters
build on the same two level primitives, ``begin`` and ``extend``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Protocol

import torch

from ..core import options
from ..core.kv import SlotKV
from ..core.registry import Registry
from ..core.sampling import choose_slots, probs
from ..core.tree import DraftTree
from ..trees import eagle2, pminchain
from ..trees.policies import POLICIES, TreePolicy
from .levels import Forward, LevelGen, Levels, drafted


class DrafterProtocol(Protocol):
    """What the decode loop (``engine.loop``) calls on a drafter, per prompt."""

    def reset(self, prompt_ids: Sequence[int]) -> None: ...

    def draft(self, policy: TreePolicy, rule: str, rng: torch.Generator) -> Levels: ...

    def commit(self, tree: DraftTree, path: Sequence[int], next_token: int) -> None: ...

    def close(self) -> None: ...


Grow = Callable[[Any, Any, str, torch.Generator], Levels]  # (drafter, policy, rule, rng) -> levels


class SameVocab:
    """How a draft model over the target's own vocabulary reads a target context (rank
    replay, ``Drafter.rank_vocab``): token for token.  ``crossvocab.VocabMap`` is the other kind."""

    @staticmethod
    def draft_prompt(prompt_ids: Sequence[int]) -> list[int]:
        return [int(t) for t in prompt_ids]

    @staticmethod
    def draft_tokens(token: int) -> list[int]:
        return [int(token)]

    @staticmethod
    def to_target(logits: torch.Tensor) -> torch.Tensor:
        return logits


SAME_VOCAB = SameVocab()


class Drafter:
    """Base class: keeps the committed token history (prompt + output) and grows
    ``tree=none`` (no draft tokens).  What a drafter can do is declared here, as data:

    * ``grows``: policy kind (``PolicySpec.kind``) -> the level generator that grows it;
      ``draft`` dispatches on the policy's kind and refuses the others in one line;
    * ``draft_model``: it needs a separate draft model (``pair.draft``);
      ``own_tokenizer``: that model keeps its own vocabulary (else it must share the target's);
    * ``pair_keys``: its own ``pair.*`` keys and their defaults (``???``: required); with
      ``PAIR_COMMON`` they are the schema of its pairs, stored when it is registered
      (``schema/pair/<name>``, ``pair_schema``), which a conf/pair/*.yaml extends; ``check_params``
      checks their values before any model loads; ``pair_inputs`` resolves them on the target's
      config, before its weights load);
    * ``rank_replay``: static shapes replay from the teacher-forced ranks of ``rank_model``
      (reading the target's tokens as ``rank_vocab`` says): its tree is a function of the
      committed context alone;
    * ``teacher_forced``: its children at every node are the top-k / draws of ``pair.draft``'s
      own next-token distribution over the target's vocabulary and nothing else (no n-gram
      merge, vocabulary map or layer view), so teacher-forcing ``pair.draft`` along a
      continuation gives its draft at every position; ``study.tools.calibrate`` measures such a
      drafter at every position (greedy: ``rank_model``'s cached ranks, so it also declares
      ``rank_replay``; other modes: star trials on ``pair.draft``'s logits), any other
      greedy only, by a star-tree drafted replay;
    * ``forward_model``: the model it forwards per depth (how its draft cost is charged:
      forward costs of that model, or its measured draft time where it runs none);
    * ``vector_drafter``: the drafter kind whose pair_id ``tree.calib_pair_id=auto`` names for a
      Sequoia shape this drafter grows (None: its own; merged: ``model``, which grows that shape).
    ``name`` is set by the registry (``DRAFTERS``)."""

    name: ClassVar[str] = "base"
    draft_model: ClassVar[bool] = False
    own_tokenizer: ClassVar[bool] = False
    rank_replay: ClassVar[bool] = False
    teacher_forced: ClassVar[bool] = False
    pair_keys: ClassVar[Mapping[str, Any]] = {}
    vector_drafter: ClassVar[str | None] = None
    grows: ClassVar[Mapping[str, Grow]]

    @classmethod
    def check_params(cls, params: Mapping[str, Any]) -> None:
        """ValueError (one line naming the key) for a bad drafter parameter in ``pair``."""
        for key in params:
            if key not in cls.pair_keys:
                raise ValueError(
                    f"pair.{key}: not a key of pair.drafter={cls.name}; "
                    f"its own keys: {', '.join(cls.pair_keys) or 'none'}"
                )

    @classmethod
    def pair_inputs(cls, params: Mapping[str, Any], config, target_name: str) -> dict:
        """Pair fields (``inputs.models.Pair``) derived from its own keys and the target's config
        (read before its weights load, so a bad key is refused first)."""
        return {}

    @classmethod
    def shared_kv(cls, pair) -> SlotKV | None:
        """The draft cache every row of a job drafts into (None: the drafter runs no model)."""
        return None

    @classmethod
    def rank_model(cls, pair):
        """The model whose teacher-forced top-k ranks this drafter's static trees follow
        (``rank_replay`` drafters only: greedy replay of a static shape from ranks)."""
        raise NotImplementedError(f"the {cls.name} drafter has no rank replay")

    @classmethod
    def rank_vocab(cls, pair):
        """How ``rank_model`` reads the target's tokens (its prompt, each committed token,
        its logits over the target's vocabulary): ``SAME_VOCAB`` unless it has its own."""
        return SAME_VOCAB

    @classmethod
    def prepare(cls, pair) -> None:
        """What this drafter sets up on a pair as it is loaded (``inputs.models.load_pair``),
        once: nothing unless it has its own (tli: the vocabulary map and the sliced head)."""

    @classmethod
    def from_pair(cls, pair, temperature: float = 1.0, top_p: float = 1.0, kv=None) -> Drafter:
        raise NotImplementedError(f"the {cls.name} drafter is not made from a pair")

    def forward_model(self):
        """The model this drafter runs a forward of per tree depth (forward costs), or None."""
        return None

    def reset(self, prompt_ids: Sequence[int]) -> None:
        self.history = list(prompt_ids)

    def draft(self, policy: TreePolicy, rule: str, rng: torch.Generator) -> Levels:
        check_supported(type(self), policy.kind, policy.name)
        return self.grows[policy.kind](self, policy, rule, rng)

    def draft_now(self, policy: TreePolicy, rule: str, rng: torch.Generator) -> DraftTree:
        """``draft`` run on its own (batch 1), for scripts and tests."""
        return drafted(self.draft(policy, rule, rng))

    def grow_none(self, policy: TreePolicy, rule: str, rng: torch.Generator) -> Levels:
        yield from ()
        return DraftTree.root_only(self.history[-1], rule)

    grows = {"none": grow_none}

    def commit(self, tree: DraftTree, path: Sequence[int], next_token: int) -> None:
        self.history += [int(tree.tokens[n]) for n in path] + [int(next_token)]

    def close(self) -> None:
        """The prompt is done: release what the drafter holds for it."""

    @classmethod
    def child_rule(cls, kind: str, rule: str) -> str:
        """The child rule of the trees this drafter grows for a policy kind when a
        mode asks for ``rule`` (what job validation checks the mode against)."""
        return rule


# a model's keys (inputs.models): source, then id (embedded, hub) or path (local), and weights
MODEL_SPEC = options.node("a model spec", {"source": None, "id": None, "path": None, "weights": None})
# the keys every pair has ("???": required; draft and target are model specs, checked by the job
# spec; a drafter without a draft model leaves draft unset)
PAIR_COMMON = {"name": "???", "draft": MODEL_SPEC, "target": MODEL_SPEC, "drafter": None, "chat_template": "???"}


def pair_schema(name: str, cls: type[Drafter]) -> dict[str, Any]:
    """The keys and defaults of a pair that drafter ``name`` drafts for: ``PAIR_COMMON`` and its ``pair_keys``."""
    return {**PAIR_COMMON, "drafter": name, **cls.pair_keys}


def _store_pair_schema(name: str, cls: type[Drafter]) -> None:
    """``schema/pair/<name>`` (no option: a pair is a named variant in conf/pair/, which extends it)."""
    options.store("pair", name, pair_schema(name, cls), option=False, label=f"pair.drafter={name}")


DRAFTERS: Registry[type[Drafter]] = Registry("drafter", name_attr="name", on_add=_store_pair_schema)


def check_supported(cls: type[Drafter], kind: str, name: str) -> None:
    """One line naming the tree policies a drafter supports."""
    if kind not in cls.grows:
        ok = [spec.name for spec in POLICIES.entries() if spec.kind in cls.grows]
        raise ValueError(f"tree={name} is not supported by the {cls.name} drafter: use one of {', '.join(ok)}")


@DRAFTERS.register("model")
class ModelDrafter(Drafter):
    """A small causal LM drafting with tree attention over its slot KV cache: a row of a
    ``SlotKV`` (shared by the rows of a batched run; its own by default)."""

    draft_model = True
    rank_replay = True
    teacher_forced = True

    def __init__(self, model, temperature: float = 1.0, top_p: float = 1.0, kv: SlotKV | None = None):
        self.model = model
        self.temperature = temperature
        self.top_p = top_p
        self.kv = kv if kv is not None else SlotKV(model)
        self.row: int | None = None

    @classmethod
    def shared_kv(cls, pair) -> SlotKV | None:
        return SlotKV(pair.draft) if pair.draft is not None else None

    @classmethod
    def rank_model(cls, pair):
        return pair.draft

    @classmethod
    def from_pair(cls, pair, temperature: float = 1.0, top_p: float = 1.0, kv=None) -> ModelDrafter:
        if pair.draft is None:
            raise ValueError(f"pair={pair.name} has no draft model (pair.draft): the {cls.name} drafter needs one")
        return cls(pair.draft, temperature, top_p, kv)

    @classmethod
    def child_rule(cls, kind: str, rule: str) -> str:
        return "topk" if kind in ("eagle2", "pmin_chain") else rule

    def forward_model(self):
        return self.model

    # -- cache state ------------------------------------------------------
    def reset(self, prompt_ids: Sequence[int]) -> None:
        super().reset(prompt_ids)
        self.close()
        self.row = self.kv.add(prompt_ids)
        self.pending = [int(prompt_ids[-1])]  # committed tokens not yet in the cache

    def close(self) -> None:
        if self.row is not None:
            self.kv.drop(self.row)
            self.row = None

    def cache_row(self) -> int:
        """This prompt's row of the draft cache (``reset`` adds it)."""
        assert self.row is not None, "reset() first"
        return self.row

    def chain(self) -> list[int]:
        """The draft-model tokens ``begin`` forwards: the pending tokens (the tree root
        ``pending[-1]`` last).  A drafter with its own vocabulary returns its own ids."""
        return self.pending

    def begin(self) -> LevelGen[torch.Tensor]:
        """Level 0: forward the ``chain`` (the committed tokens not yet in the cache).
        Starts the draft-side tree; returns the root's logits [V]."""
        chain = self.chain()
        m = len(chain)
        self.side_parents = list(range(-1, m - 1))
        self.side_tokens = list(chain)
        self.root_slot = m - 1
        logits = yield Forward(self.kv, self.cache_row(), list(self.side_parents), list(self.side_tokens), 0)
        return logits[-1]

    def extend(self, parents: Sequence[int], tokens: Sequence[int]) -> LevelGen[torch.Tensor]:
        """The next level: append nodes (parents are draft-side slots) and forward them
        in one call.  Returns their logits [k, V]; their slots are the next k indices."""
        start = len(self.side_parents)
        self.side_parents += list(parents)
        self.side_tokens += [int(t) for t in tokens]
        return (yield Forward(self.kv, self.cache_row(), list(self.side_parents), list(self.side_tokens), start))

    def q(self, logits: torch.Tensor) -> torch.Tensor:
        return probs(logits, self.temperature, self.top_p)

    def commit(self, tree: DraftTree, path: Sequence[int], next_token: int) -> None:
        super().commit(tree, path, next_token)
        if tree.slots is None:  # nothing was forwarded (tree=none)
            self.pending += [int(next_token)]
            return
        slots = tree.slots
        keep = list(range(self.root_slot + 1))  # pending chain + root
        rest: list[int] = []
        for n in path:
            if not rest and slots[n] >= 0:
                keep.append(slots[n])
            else:
                rest.append(int(tree.tokens[n]))
        self.kv.commit(self.cache_row(), keep)
        self.pending = rest + [int(next_token)]

    # -- tree building ----------------------------------------------------
    def grow_paths(self, policy, rule: str, rng: torch.Generator) -> Levels:
        return self.expand_static(policy.paths(), rule, rng)

    def grow_eagle2(self, policy, rule: str, rng: torch.Generator) -> Levels:
        return eagle2.select((yield from eagle2.grow(self, policy.width, policy.depth)), policy.budget)

    def grow_pmin_chain(self, policy, rule: str, rng: torch.Generator) -> Levels:
        return pminchain.grow(self, policy)

    grows = {**Drafter.grows, "paths": grow_paths, "eagle2": grow_eagle2, "pmin_chain": grow_pmin_chain}

    def expand_static(self, paths, children: str, rng: torch.Generator) -> Levels:
        """Grow a static rank-path shape: one draft forward per depth.  A node's
        children fill its rank slots by the child rule (``sampling.choose_slots``)."""
        n = len(paths)
        q_rows: dict[int, torch.Tensor] = {0: self.q((yield from self.begin()))}
        parents = [-1] + [0] * n
        tokens = [self.pending[-1]] + [0] * n
        ranks = [0] * (n + 1)
        slots = [self.root_slot] + [-1] * n
        index = {(): 0}
        frontier = [0]
        by_depth: dict[int, list] = {}
        for i, p in enumerate(paths):
            by_depth.setdefault(len(p), []).append((i + 1, p))
        for d in sorted(by_depth):
            level = by_depth[d]
            for node in frontier:  # choose children of this level
                kids = [(i, p) for i, p in level if index.get(p[:-1]) == node]
                if not kids:
                    continue
                kids.sort(key=lambda ip: ip[1][-1])
                toks, rks = choose_slots(q_rows[node], [p[-1] for _, p in kids], children, rng)
                for (i, _p), tok, rk in zip(kids, toks, rks):
                    parents[i], tokens[i], ranks[i] = node, int(tok), int(rk)
            for i, p in level:
                index[p] = i
            expand = [i for i, p in level if (d + 1) in by_depth and any(c[:-1] == p for _, c in by_depth[d + 1])]
            if expand:
                logits = yield from self.extend([slots[parents[i]] for i in expand], [tokens[i] for i in expand])
                base = len(self.side_parents) - len(expand)
                for j, i in enumerate(expand):
                    slots[i] = base + j
                    q_rows[i] = self.q(logits[j])
            frontier = expand
        return self.make_tree(parents, tokens, ranks, slots, q_rows, children)

    @staticmethod
    def make_tree(parents, tokens, ranks, slots, q_rows: dict, rule: str) -> DraftTree:
        vocab = q_rows[0].shape[-1]
        q = torch.zeros(len(parents), vocab)
        for i, row in q_rows.items():
            q[i] = row
        return DraftTree(
            parents=list(parents),
            tokens=torch.tensor(tokens, dtype=torch.long),
            ranks=list(ranks),
            q=q,
            slots=list(slots),
            child_rule=rule,
        )

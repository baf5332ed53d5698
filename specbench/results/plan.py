"""The reference study as one declaration: its parts, each with the sweeps that run it and the floor it
must meet (`PARTS`: issue #23's floors in its priority order, which is also each phase's run order).

* ``run_all.sh`` runs every sweep from here (``python -m specbench.study.tools.plan runs --phase hour``: one
  tab-separated line per sweep, ``part  folder  preset  overrides...``; the command is ``study/tools/plan.py``),
  so adding a part to the study is one entry in `PARTS`.
* ``report.floors`` checks the committed results against the floors (`floors`) and REPORT.md names each
  unmet one by its ``Floor.name``.
* ``tests/test_study_plan.py`` composes every sweep with Hydra and checks that it covers its part's floor
  and that ``run_all.sh`` starts no reference sweep of its own.
* The names the default run's steps are recorded under in results/run_times.csv that the plan's estimates
  and the report look up (``COLLECT_STEP``, ``REPORT_STEP``), and ``plural``, a count in words for the
  plan's and the check's lines.

Pure Python (dataclasses and the standard library; imports nothing of specbench): the study's tools and
the report read it without torch or pandas.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

STATIC = ("chain", "binary", "kary", "topk_wide", "specinfer", "medusa63", "sequoia", "adaptive_chain")
FOUR = ("chain", "binary", "sequoia", "specinfer")  # the shapes every other pair runs
B4_32 = (4, 8, 16, 32)
HE_MT = ("humaneval", "mt_bench")
THREE = ("humaneval", "mt_bench", "stdlib_code")
HE_MT_ARGS = ("dataset=humaneval,mt_bench",)
LOW = "tree.budget=1,2,3,4,8,16,32"  # budgets 1-3 bracket the optimum at the low end (#34 item 1)
SEQUOIA_CALIB = (  # tree=merged's Sequoia shape reads the n-gram pair's acceptance vector
    "+tree.vector=results/acceptance_vector.csv",
    "+tree.calib_pair_id=auto",
    "+tree.calib_dataset=${dataset.name}",
    "+tree.calib_verify=greedy",
    "+tree.calib_temperature=0.0",
)
MODES = {  # the sampling presets: T = 1 (parts 3-3d), then T = 0.3 / 0.7 (3e, 3f)
    "chain": "reference_modes_chain",
    "tree": "reference_modes_tree",
    "noreplace": "reference_modes_noreplace",
    "lossy": "reference_modes",
}


@dataclass(frozen=True)
class Floor:
    """Every pair x tree x budget x dataset x rule x temperature has a summary row on at least
    ``min_prompts`` prompts of ``min_tokens`` new tokens (``engine``: "live" batched, "live-b1" at batch 1)."""

    name: str
    pairs: tuple
    trees: tuple  # tree labels: a tree name, or merged:<shape>
    budgets: tuple
    datasets: tuple
    min_prompts: int
    rules: tuple = ("greedy",)
    temperatures: tuple = (0.0,)
    min_tokens: int = 128
    engine: str | None = None
    shapes: tuple = ()  # (tree, budget) pairs instead of trees x budgets, where given

    def cells(self):
        shapes = self.shapes or [(t, b) for t, b in itertools.product(self.trees, self.budgets) if _fits(t, b)]
        return [
            (p, t, b, d, r, temp)
            for p, (t, b), d, r, temp in itertools.product(
                self.pairs, shapes, self.datasets, self.rules, self.temperatures
            )
        ]


def _fits(tree: str, budget: int) -> bool:
    return not (tree == "none") ^ (budget == 0)


@dataclass(frozen=True)
class Sweep:
    """One multirun: ``python -m specbench.run -m sweep=<preset> <args>`` into ``$OUT/<folder>``."""

    folder: str
    preset: str
    args: tuple[str, ...] = ()
    phase: str = "hour"  # hour: run_all.sh's hour; extended: SPECBENCH_EXTENDED=1; tiny: the tiny plan


@dataclass(frozen=True)
class Part:
    id: str
    sweeps: tuple[Sweep, ...]
    floor: Floor | None = None


def _speed(batch: int, pair: str, trees: str, phase: str = "hour") -> Sweep:
    """Live bf16 speed, 16 HumanEval prompts x 64 tokens (plain decoding runs per pair: a measured
    speedup divides by its own pair's plain run)."""
    args = (f"pair={pair}", f"tree={trees}", f"batch_size={batch}")
    return Sweep(f"speed_b{batch}_{pair}", "reference_speed", args, phase)


def _sampling(
    pid: str, kinds: tuple, temps: tuple, limit: int, name: str, tree: str, budget: int, rules: tuple
) -> Part:
    """A sampling part: its presets (live, bf16, 128 new tokens; each rule beside its strongest token-level
    baseline on the same drafted trees, ``verify.paired_with``) at ``temps`` on ``limit`` prompts of
    HumanEval and MT-bench, and its floor on qwen_coder's one shape, from the same numbers."""
    args = (f"verify.temperature={','.join(map(str, temps))}", *HE_MT_ARGS, f"dataset.limit={limit}")
    suffix = "_t" + "_".join(f"{t:g}".replace(".", "") for t in temps)  # _t1, _t03_07
    sweeps = tuple(Sweep(MODES[k] + suffix, MODES[k], args, "extended") for k in kinds)
    return Part(pid, sweeps, Floor(name, ("qwen_coder",), (tree,), (budget,), HE_MT, limit, rules, temps))


_XPAIRS = (*HE_MT_ARGS, "tree=chain,binary,sequoia,specinfer", "pair=smollm_qwen,gemma_qwen")
_MERGED = (*HE_MT_ARGS, LOW, "dataset.limit=32")
_T1 = (1.0,)
_T37 = (0.3, 0.7)
_CHAIN_RULES = ("speculative", "block", "gbv", "hsd")
_LOSSY = ("naive", "typical", "ratio", "conservative", "epsilon")

PARTS: tuple[Part, ...] = (
    Part(
        "1",
        (Sweep("reference", "reference"),),
        Floor(
            "1. qwen_coder greedy, every static shape, budgets 4-64, 3 datasets",
            ("qwen_coder",),
            STATIC,
            (4, 8, 16, 32, 64),
            THREE,
            64,
        ),
    ),
    Part("1-hw", (Sweep("reference_sequoia_hw", "reference_sequoia_hw"),)),
    Part(
        "1b",
        (Sweep("reference_live", "reference_live"),),
        Floor("1b. EAGLE-2 on part 1's prompts, all 3 datasets", ("qwen_coder",), ("eagle2",), (16,), THREE, 64),
    ),
    Part(
        "1c",
        (Sweep("reference_pairs", "reference_pairs"),),
        Floor(
            "1c. n-gram drafter on part 1's prompts",
            ("ngram_qwen",),
            ("chain", "binary", "ngram_trie"),
            (16,),
            THREE,
            64,
        ),
    ),
    Part(
        "1d",
        (Sweep("reference_merged", "reference_merged"),),
        Floor(
            "1d. merged drafter on part 1's prompts, all 3 datasets",
            ("merged_qwen",),
            ("merged:binary",),
            (16,),
            THREE,
            64,
        ),
    ),
    Part(
        "2",
        (Sweep("reference_skip", "reference_skip"),),
        Floor(
            "2. layer-skip pair: chain/binary/sequoia/specinfer, budgets 4-32",
            ("qwen_skip",),
            FOUR,
            B4_32,
            HE_MT,
            32,
        ),
    ),
    Part(
        "2b",
        (  # the cross-vocabulary pairs replay by ranks (every budget a walk over one pass's ranks)
            Sweep("reference_xpairs", "reference_xpairs", (*_XPAIRS, "tree.budget=1,2,3,4,5,6,8,12,16,24,32,48,64")),
            Sweep(
                "reference_pairs_ext",
                "reference_pairs",  # the n-gram pair (its preset's 64 prompts)
                (*HE_MT_ARGS, LOW, "tree=chain,binary,sequoia,specinfer"),
                "extended",
            ),
        ),
        Floor(
            "2b. other pairs: chain/binary/sequoia/specinfer, budgets 4-32",
            ("smollm_qwen", "gemma_qwen", "ngram_qwen"),
            FOUR,
            B4_32,
            HE_MT,
            32,
        ),
    ),
    Part("target05", (Sweep("reference_target05", "reference_target05"),)),  # 4 drafters x 4 shapes, 1..32
    Part(
        "2c",
        (
            Sweep(
                "reference_merged_ext", "reference_merged", (*_MERGED, "tree.shape=chain,binary,specinfer"), "extended"
            ),
            Sweep(
                "reference_merged_seq", "reference_merged", (*_MERGED, "tree.shape=sequoia", *SEQUOIA_CALIB), "extended"
            ),
        ),
        Floor(
            "2c. merged pair: chain/binary/sequoia/specinfer shapes, budgets 4-32",
            ("merged_qwen",),
            tuple(f"merged:{shape}" for shape in FOUR),
            B4_32,
            HE_MT,
            32,
        ),
    ),
    _sampling("3", ("chain",), _T1, 32, "3. chains at T=1: speculative, block, gbv, hsd", "chain", 4, _CHAIN_RULES),
    _sampling(
        "3b",
        ("tree",),
        _T1,
        32,
        "3b. trees with replacement at T=1: mss, traversal, gbv",
        "binary",
        16,
        ("mss", "traversal", "gbv"),
    ),
    _sampling(
        "3c",
        ("noreplace",),
        _T1,
        32,
        "3c. trees without replacement at T=1: sequoia, traversal, gbv",
        "binary",
        16,
        ("sequoia", "traversal", "gbv"),
    ),
    _sampling("3d", ("lossy",), _T1, 32, "3d. lossy rules at T=1", "binary", 16, _LOSSY),
    _sampling("3e", ("chain",), _T37, 16, "3e. chains at T=0.3 and 0.7", "chain", 4, _CHAIN_RULES),
    _sampling(
        "3f",
        ("tree", "noreplace", "lossy"),
        _T37,
        16,
        "3f. trees and lossy rules at T=0.3 and 0.7",
        "binary",
        16,
        ("mss", "traversal", "sequoia", *_LOSSY),
    ),
    Part(
        "4",
        (_speed(8, "qwen_coder", "none,chain,binary"),),
        Floor(
            "4. live speed at batch 8: plain, chain/4, binary/16",
            ("qwen_coder",),
            (),
            (),
            ("humaneval",),
            16,
            engine="live",
            min_tokens=64,
            shapes=(("none", 0), ("chain", 4), ("binary", 16)),
        ),
    ),
    Part(
        "batch",  # plain and chain N=1..6 at B=1..16, 16 prompts x 32 tokens: the batch-size schedule
        (
            Sweep("batch_none", "reference_batch", ("tree=none", "batch_size=1,2,4,8,16")),
            Sweep("batch_chain", "reference_batch", ("tree=chain", "tree.budget=1,2,3,4,6", "batch_size=1,2,4,8,16")),
        ),
    ),
    Part(
        "4b",
        (_speed(1, "qwen_coder", "none,chain", "extended"), _speed(1, "smollm_qwen", "none,chain", "extended")),
        Floor(
            "4b. live speed at batch 1: plain and chain/4, qwen_coder and smollm_qwen",
            ("qwen_coder", "smollm_qwen"),
            (),
            (),
            ("humaneval",),
            16,
            engine="live-b1",
            min_tokens=64,
            shapes=(("none", 0), ("chain", 4)),
        ),
    ),
)


# the tiny plan (phase "tiny"): the study's sweep machinery on a few short prompts, one sweep of 2 jobs
# (a preset's shape, replayed and live), for any small pair given beside it (the tests' tiny local pair:
# pair=local pair.draft.path=... pair.target.path=...); scripts/run_plan.sh tiny runs it end to end
_TINY = ("dataset=smoke", "dataset.limit=2", "max_new_tokens=8", "batch_size=2", "dtype=float32")
TINY: tuple[Part, ...] = (
    Part(
        "tiny",
        (Sweep("tiny", "reference", (*_TINY, "tree=binary", "tree.budget=2", "engine=replay,live"), "tiny"),),
    ),
)
PHASES = ("hour", "extended", "tiny")


def floors() -> tuple[Floor, ...]:
    """The floors in the issue's priority order (`PARTS`' order: 1, 1b-1d, 2, 2b, 2c, 3-3f, 4, 4b)."""
    return tuple(p.floor for p in PARTS if p.floor is not None)


# The interleaved benchmark's batch-size schedule (#51 item 6; scripts/full_study.sh's step, read by
# study.tools.validate.schedule_picks and study.tools.eta): per pair and batch size B one
# `python -m specbench.study.tools.speed +speed_candidates=schedule` run, the target's own small draft
# first, then a cross-vocabulary pair
SCHEDULE_PAIRS = ("qwen_coder", "smollm_qwen")
SCHEDULE_SIZES = (1, 2, 4, 8, 16)
SCHEDULE_CHAINS = (1, 2, 3, 4, 6)  # chain N at every B, beside the batch-1 answer's tree and one binary tree
# prompts per B: at least 16, and 6 units of B prompts or more (an interval over fewer units is a t interval,
# results.speedstats.BOOT_UNITS, and over 2 units hardly one: t(1) = 12.7)
SCHEDULE_DATASET, SCHEDULE_TOKENS, SCHEDULE_PROMPTS = "humaneval", 64, {1: 16, 2: 16, 4: 32, 8: 48, 16: 96}


def schedule_jobs() -> list[tuple[str, str, int, int, int]]:
    """(pair, dataset, B, prompts, max_new_tokens) of every schedule benchmark, in run order."""
    return [
        (p, SCHEDULE_DATASET, b, SCHEDULE_PROMPTS[b], SCHEDULE_TOKENS) for p in SCHEDULE_PAIRS for b in SCHEDULE_SIZES
    ]


def schedule_marker(pair: str, b: int) -> str:
    """The full study's once-marker of one schedule benchmark (``$OUT/NAME.done``)."""
    return f"schedule_{pair}_b{b}"


def runs(phase: str) -> list[tuple[str, Sweep]]:
    """(part id, sweep) of every sweep in ``phase``, in run order."""
    return [(p.id, s) for p in PARTS + TINY for s in p.sweeps if s.phase == phase]


# the default run's collect step until 2026-12-05 (a collect of no new job that rewrote the committed rows, 76-282 s:
# the run no longer has it); its seconds in results/run_times.csv measure this machine's pandas work beside the
# slow host's, where they are recorded (study.tools.estimates)
COLLECT_STEP = "collect and the run's record"
# the default run's report step (scripts/default_run.sh, from 2026-12-06: recorded in run_times.csv after the report)
REPORT_STEP = "the report ("


def plural(n: int, word: str) -> str:
    """``1 prompt``, ``2 prompts``."""
    return f"{n} {word}" + "s" * (n != 1)

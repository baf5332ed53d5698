"""The figures' one palette: eight colour-blind-safe colours (Okabe & Ito), four more (Tol) and eight markers.

Every name a figure draws has one fixed look, a (colour, marker) pair, the same in every figure:
one table for tree shapes, one for pairs, one for verification rules and one for attention
implementations.  Within a table no two names share a look, so two series in one panel never
look alike; a colour is never the only thing that tells two series apart (the marker differs
too).  A variant with an entry of its own (``sequoia(cost-aware)``) takes that look; a name in no
table (a new shape or pair) takes a look from a hash of its name; another parametrised variant
(``kary(width=3)``) keeps its name's colour and takes a marker by hash.
"""

from __future__ import annotations

import zlib

# Okabe & Ito (2008), "Color Universal Design": distinguishable under the common colour-vision deficiencies
BLACK, ORANGE, SKY, GREEN, YELLOW, BLUE, VERMILLION, PURPLE = (
    "#000000",
    "#E69F00",
    "#56B4E9",
    "#009E73",
    "#F0E442",
    "#0072B2",
    "#D55E00",
    "#CC79A7",
)
COLORS = (BLUE, VERMILLION, GREEN, PURPLE, ORANGE, SKY, BLACK, YELLOW)
# four more from Paul Tol's colour-blind-safe "muted" scheme, so the shapes that appear together
# (chain and eagle2, binary and adaptive_chain, ...) each have a colour of their own
INDIGO, WINE, TEAL, OLIVE = "#332288", "#882255", "#44AA99", "#999933"
EXTRA = (INDIGO, WINE, TEAL, OLIVE)
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
PLAIN = "#BBBBBB"  # plain decoding (no speculation), where a figure shows it as a region or a line

SHAPES: dict[str, tuple[str, str]] = {
    "none": (BLACK, "o"),
    "chain": (BLUE, "o"),
    "binary": (VERMILLION, "s"),
    "kary": (GREEN, "^"),
    "topk_wide": (PURPLE, "D"),
    "specinfer": (ORANGE, "v"),
    "sequoia": (SKY, "P"),
    "medusa63": (BLACK, "X"),
    "paths": (YELLOW, "*"),
    "eagle2": (INDIGO, "D"),
    "adaptive_chain": (OLIVE, "^"),
    "ngram_trie": (TEAL, "s"),
    "merged": (WINE, "o"),
    "sequoia(cost-aware)": (TEAL, "*"),  # Sequoia's DP priced by the cost curve: a tree of its own
}
PAIRS: dict[str, tuple[str, str]] = {  # a drafter family's colour; marker: the 1.5B target (o) or the 0.5B (s)
    "qwen_coder": (BLUE, "o"),
    "qwen_skip": (ORANGE, "o"),
    "qwen05_skip": (ORANGE, "s"),
    "smollm_qwen": (GREEN, "o"),
    "smollm_qwen05": (GREEN, "s"),
    "gemma_qwen": (PURPLE, "o"),
    "gemma_qwen05": (PURPLE, "s"),
    "ngram_qwen": (VERMILLION, "o"),
    "ngram_qwen05": (VERMILLION, "s"),
    "merged_qwen": (SKY, "o"),
}
RULES: dict[str, tuple[str, str]] = {
    "greedy": (BLACK, "o"),
    "speculative": (BLUE, "o"),
    "mss": (GREEN, "s"),
    "sequoia": SHAPES["sequoia"],  # the rule and the shape share a name, so they share a look
    "block": (VERMILLION, "^"),
    "traversal": (PURPLE, "D"),
    "gbv": (ORANGE, "v"),
    "hsd": (BLACK, "X"),
    "typical": (OLIVE, "*"),
    "naive": (BLUE, "s"),
    "ratio": (WINE, "o"),  # the lossy rules apart from the lossless ones they are drawn beside
    "conservative": (TEAL, "D"),
    "epsilon": (INDIGO, "^"),
}
IMPLS: dict[str, tuple[str, str]] = {
    "fused": (BLUE, "o"),
    "sequential": (VERMILLION, "s"),
    "flex": (ORANGE, "^"),
    "flex_compiled": (GREEN, "D"),
}
TABLES = {"shape": SHAPES, "pair": PAIRS, "rule": RULES, "impl": IMPLS}


def base_name(name: str) -> str:
    """The palette key of a label: 'kary(width=3)' -> kary, 'mss T=1' -> mss, 'p [id]' -> p."""
    return str(name).split("(", 1)[0].split(" [", 1)[0].split(" ", 1)[0]


def _hashed(key: str, salt: str = "") -> int:
    return zlib.crc32((salt + key).encode())


def look(name: str, kind: str | None = None) -> tuple[str, str]:
    """(colour, marker) of a name: from ``kind``'s table, else the first table that has it."""
    key = base_name(name)
    if key == "merged" and "shape=" in str(name) and kind in (None, "shape"):
        return merged_look(name)  # merged's colour, the filled shape's marker
    tables = [TABLES[kind]] if kind else list(TABLES.values())
    named = next((t[str(name)] for t in tables if str(name) in t), None)  # a variant with a look of its own
    if named is not None:
        return named
    found = next((t[key] for t in tables if key in t), None)
    if found is None:
        h = _hashed(key)
        found = (COLORS[h % len(COLORS)], MARKERS[(h // len(COLORS)) % len(MARKERS)])
    if "(" in str(name) and key != "merged":  # a parametrised variant: its name's colour, a marker by hash
        found = (found[0], MARKERS[_hashed(str(name), "variant") % len(MARKERS)])
    return found


def merged_look(name: str) -> tuple[str, str]:
    """A merged tree ('merged(shape=chain, ...)' or 'merged:chain'): merged's colour, the filled shape's marker."""
    inner = str(name).split("shape=", 1)[-1].split(",")[0].rstrip(")") if "shape=" in str(name) else ""
    inner = inner or str(name).partition(":")[2].split(" ")[0]
    return SHAPES["merged"][0], look(inner, "shape")[1] if inner else SHAPES["merged"][1]

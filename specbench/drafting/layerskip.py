"""Self-speculative drafting by layer skipping: the draft is the TARGET run with a
subset of its decoder layers (Draft & Verify, Zhang et al., ACL 2024; LayerSkip,
Elhoushi et al., ACL 2024), then the target's own final norm and LM head.

Owns ``layer_view`` (a model object over a layer subset that shares every weight
tensor with the target: no copy) and the ``layerskip`` drafter, a plain
``ModelDrafter`` over that view with its own KV cache.

``pair.layers`` picks the subset: an int k = the first k layers (LayerSkip's
early exit), or an explicit list of layer indices (Draft & Verify's skipped
intermediate layers) as a list or as text like '0-9,16-27', run in ascending
order (conf/pair/qwen_skip.yaml says how its default was chosen).  The view's
layers are renumbered 0..k-1 (shallow copies of each layer and its attention that
share the weights), so the view's KV cache is an ordinary k-layer cache, batched
like any draft model's (``kv.SlotKV``).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence

from torch import nn

from ..core import forwards
from ..core.kv import SlotKV
from .drafters import DRAFTERS, ModelDrafter


def resolve_layers(spec, num_layers: int | None = None) -> tuple[int, ...]:
    """``pair.layers`` (int k = the first k layers, a list, or text like '0-9,16-27') ->
    sorted distinct layer indices; one-line errors naming pair.layers.  ``num_layers=None``
    checks all but the upper bound (the job spec, before the target is loaded)."""
    given = spec
    if isinstance(spec, str) and spec.strip():
        try:
            spec = parse_layers(spec.strip())
        except ValueError:
            raise ValueError(f"pair.layers='{given}': write ranges like '0-9,16-27'") from None
    if isinstance(spec, int) and not isinstance(spec, bool) and spec >= 1:
        spec = range(spec)
    elif spec is None or isinstance(spec, (bool, int, str)):
        raise ValueError(
            f"pair.layers={given!r}: give the number k >= 1 of leading target layers the draft runs "
            "(e.g. pair.layers=14) or a list of layer indices (e.g. pair.layers='0-9,16-27')"
        )
    try:
        layers = sorted({int(i) for i in spec})
    except (TypeError, ValueError):
        raise ValueError(f"pair.layers={given!r}: not an int or a list of layer indices") from None
    if not layers or layers[0] < 0 or (num_layers is not None and layers[-1] >= num_layers):
        raise ValueError(
            f"pair.layers={given!r}: layer indices must lie in 0..{(num_layers or 1) - 1}"
            f"{f' (the target has {num_layers} layers)' if num_layers else ''}"
        )
    return tuple(layers)


def describe(layers: Sequence[int]) -> str:
    """Compact text of a layer subset, e.g. '0-7,20-27'."""
    runs: list[list[int]] = []
    for i in layers:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(f"{a}-{b}" if b > a else f"{a}" for a, b in runs)


def parse_layers(text: str) -> int | list[int]:
    """'14' -> 14 (the first 14 layers); '0-7,20-27' -> the listed layers (``describe``'s inverse)."""
    if text.isdigit():
        return int(text)
    if not re.fullmatch(r"\d+(-\d+)?(,\d+(-\d+)?)*", text):
        raise ValueError(f"layer subset '{text}': write ranges like '0-9,16-27'")
    out: list[int] = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def _shallow(module: nn.Module) -> nn.Module:
    """A copy of ``module`` sharing its parameters, with its own child-module table."""
    out = copy.copy(module)
    out._modules = dict(module._modules)
    return out


def _renumbered(layer: nn.Module, index: int) -> nn.Module:
    """``layer`` (shared weights) reading and writing cache layer ``index``."""
    out = _shallow(layer)
    for owner in (out, getattr(out, "self_attn", None)):
        if owner is not None and hasattr(owner, "layer_idx"):
            if owner is not out:
                owner = _shallow(owner)
                out.self_attn = owner
            setattr(owner, "layer_idx", index)  # noqa: B010  (nn.Module types attributes as tensors)
    return out


def layer_view(model, layers: Sequence[int]):
    """A causal LM that runs only ``layers`` of ``model``'s decoder, then its final
    norm and LM head.  Every parameter is the target's own tensor (no copy)."""
    inner = model.get_decoder()
    if not hasattr(inner, "layers"):
        raise ValueError(
            f"{type(model).__name__} has no decoder layer list: pair.drafter=layerskip "
            "supports decoder-only models with model.layers"
        )
    layers = resolve_layers(list(layers), len(inner.layers))
    view_config = copy.deepcopy(model.config)
    view_config.num_hidden_layers = len(layers)
    if getattr(view_config, "layer_types", None):
        view_config.layer_types = [model.config.layer_types[i] for i in layers]
    view_inner = _shallow(inner)
    view_inner.layers = nn.ModuleList([_renumbered(inner.layers[i], k) for k, i in enumerate(layers)])
    view_inner.config = view_config
    forwards.count(view_inner, f"{getattr(inner, forwards.NAME, 'target')}@layers={describe(layers)}")
    view = _shallow(model)
    setattr(view, _decoder_attr(model, inner), view_inner)
    view.config = view_config
    return view


def _decoder_attr(model, inner) -> str:
    return next(name for name, child in model.named_children() if child is inner)


@DRAFTERS.register("layerskip")
class LayerSkipDrafter(ModelDrafter):
    """The target's layer subset drafting for the target itself (no separate draft model)."""

    draft_model = False
    teacher_forced = False  # its draft is the target's layer view, not pair.draft (calibrated by star replay)
    pair_keys = {"layers": "???"}  # required: k (the first k layers) or a list / ranges text like '0-9,16-27'

    def __init__(self, target, layers: Sequence[int], temperature: float = 1.0, top_p: float = 1.0, kv=None):
        view = kv.model if kv is not None else layer_view(target, layers)
        super().__init__(view, temperature, top_p, kv)
        self.layers = tuple(layers)

    @classmethod
    def rank_model(cls, pair):
        return layer_view(pair.target, cls.layers_of(pair))

    @classmethod
    def shared_kv(cls, pair):
        """One layer view of the target per job; every row drafts into its slot cache."""
        return SlotKV(layer_view(pair.target, cls.layers_of(pair)))

    @staticmethod
    def layers_of(pair) -> Sequence[int]:
        if getattr(pair, "layers", None) is None:
            raise ValueError(f"pair={pair.name}: pair.drafter=layerskip needs pair.layers (an int k or a list)")
        return pair.layers

    @classmethod
    def from_pair(cls, pair, temperature: float = 1.0, top_p: float = 1.0, kv=None) -> LayerSkipDrafter:
        return cls(pair.target, cls.layers_of(pair), temperature, top_p, kv)

    @classmethod
    def check_params(cls, params) -> None:
        super().check_params(params)
        resolve_layers(params.get("layers"))

    @classmethod
    def pair_inputs(cls, params, config, target_name: str) -> dict:
        """``pair.layers`` resolved on the target's layer count (its config), and the draft's name."""
        layers = resolve_layers(params.get("layers"), config.num_hidden_layers)
        return {"layers": layers, "draft_name": f"{target_name}@layers={describe(layers)}"}

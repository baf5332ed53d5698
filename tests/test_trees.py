import pytest
import torch

from specbench.core.registry import UnknownName
from specbench.core.tree import ancestor_mask, depths, paths_to_parents, tree_attention_mask, tree_position_ids
from specbench.trees.policies import shape_paths

STATIC = [
    ("chain", {}),
    ("binary", {}),
    ("kary", {"width": 3}),
    ("topk_wide", {"width": 4}),
    ("specinfer", {"expansion": [1, 1, 3, 1, 1, 1, 1, 1]}),
    ("paths", {"paths": [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]}),
]


@pytest.mark.parametrize("name,params", STATIC)
@pytest.mark.parametrize("budget", [1, 2, 3, 5, 8, 16, 33, 64])
def test_every_shape_has_exactly_budget_nodes_and_is_prefix_closed(name, params, budget):
    paths = shape_paths(name, budget, **params)
    assert len(paths) == budget
    assert len(set(paths)) == budget
    have = set(paths)
    assert all(len(p) == 1 or p[:-1] in have for p in paths)
    d = depths(paths_to_parents(paths))
    assert d == sorted(d)  # breadth-first


def test_shapes_match_their_definitions():
    assert shape_paths("chain", 3) == [(0,), (0, 0), (0, 0, 0)]
    assert shape_paths("binary", 6) == [(0,), (1,), (0, 0), (0, 1), (1, 0), (1, 1)]
    assert shape_paths("topk_wide", 6, width=3) == [(0,), (1,), (2,), (0, 0), (1, 0), (2, 0)]
    si = shape_paths("specinfer", 20)
    assert max(len(p) for p in si) == 8 and sum(len(p) == 3 for p in si) == 3
    # an explicit list is trimmed in its listed order, and each kept prefix must be a tree
    assert shape_paths("paths", 3, paths=[[0], [0, 0], [1], [0, 0, 0]]) == [(0,), (1,), (0, 0)]
    with pytest.raises(ValueError, match="prefix-closed"):
        shape_paths("paths", 1, paths=[[0, 0], [0]])
    # a finite shape smaller than the budget is padded along its top-1 chain
    assert shape_paths("specinfer", 22)[-2:] == [(0,) * 9, (0,) * 10]


def test_mask_rows_are_ancestors_and_positions_are_depths():
    parents = [-1, 0, 0, 1, 1, 2, 3]
    m = ancestor_mask(parents)
    assert m[6].nonzero().flatten().tolist() == [0, 1, 3, 6]
    assert m[5].nonzero().flatten().tolist() == [0, 2, 5]
    add = tree_attention_mask(parents, past_len=4, start=3, stop=7)
    assert add.shape == (1, 1, 4, 11)
    allowed = add[0, 0] == 0
    assert allowed[:, :4].all()  # the prefix is visible
    assert torch.equal(allowed[:, 4:], m[3:7])
    assert tree_position_ids(parents, 10).tolist() == [[10, 11, 11, 12, 12, 12, 13]]


def test_bad_shapes_and_budgets_give_clear_errors():
    with pytest.raises(UnknownName, match="Valid: .*binary.*chain"):
        shape_paths("bnary", 4)
    with pytest.raises(ValueError, match="budget"):
        shape_paths("chain", 0)
    with pytest.raises(ValueError, match="prefix-closed"):
        shape_paths("paths", 2, paths=[[0], [1, 0]])

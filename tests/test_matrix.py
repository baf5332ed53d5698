"""#34 item 8: the drafter x target matrix, from a hand-made cross-pair frame."""

import pandas as pd

from specbench.report import matrix


def row(pair, draft, target, tps, rate, shape="chain", budget=4, tree=None):
    return dict(
        pair=pair,
        draft=draft,
        target=target,
        tree=tree or shape,
        cross_shape=shape,
        budget=budget,
        dataset="humaneval",
        dtype="bfloat16",
        max_new_tokens=128,
        tps_shared=tps,
        rate_shared=rate,
        n_shared=32,
    )


def test_each_drafter_against_each_target_with_a_sentence_for_those_that_ran_both():
    cross = pd.DataFrame(
        [
            row("a", "smollm", "big", 2.0, 0.25),
            row("b", "smollm", "small", 2.5, 0.38),
            row("c", "ngram", "big", 1.6, 0.27),
            row("d", "big@layers=0-9", "big", 3.6, 0.66),
            row("e", "draft", "big", 3.6, 0.65, tree="merged"),
            row("f", "smollm", "big", 9.0, 0.9, shape="binary", budget=16),  # not a fixed setting
        ]
    )
    text = "\n".join(matrix.render(cross))
    assert "**Drafter × target, chain N=4: humaneval (bfloat16, 128 new tokens)**" in text
    assert "| drafter \\ target | big | small |" in text
    assert "| smollm | 2.00 · 0.25 | 2.50 · 0.38 |" in text
    assert "| n-gram lookup | 1.60 · 0.27 | – |" in text
    assert "| self, layer subset | 3.60 · 0.66 (layers 0-9) | – |" in text
    assert "| draft + n-gram (merged) | 3.60 · 0.65 | – |" in text
    assert "- smollm: 2.50 tokens/step (rate 0.38) verified by small, 2.00 (rate 0.25) by big." in text
    assert "9.00" not in text and "binary" not in text
    one_target = cross[cross.target == "big"]
    assert matrix.render(one_target) == []  # a matrix needs two targets

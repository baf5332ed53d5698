"""The fixed prose of REPORT.md: method, speed model, metric definitions, evidence rules, references."""

METHOD = """\
**Trees.** A draft tree is stored as parent pointers in breadth-first order: node 0 is the root (the last
committed token, not yet in any KV cache) and nodes 1..N are the N draft tokens, N being the budget. A static
shape is a prefix-closed set of draft *rank paths* (Medusa style: the path `0.1` is the runner-up child of the
draft's top-1 token): `chain` follows the top-1 token, `binary` and `kary` expand the top-2 / top-`width`
children of every node, `topk_wide` continues each of the top-k first tokens as a chain, `specinfer` expands
by a per-depth factor list and `paths` takes an explicit rank-path list. Every shape lists its paths by
(depth, rank path) and the budget keeps the first N, so a budget always yields a tree of exactly N nodes.

**Drafters.** The model drafter grows the tree level by level with one draft forward per depth over the whole
frontier, using the draft's KV cache and the tree mask; it never re-runs the prefix. Children are chosen as the
verification mode requires: the draft's top-k (greedy, typical and the lossy rules), samples from q with
replacement (SpecInfer multi-step speculative sampling, `mss`) or without replacement (`sequoia`). Other
drafters: prompt lookup (an n-gram trie over the prompt and output, `ngram_qwen`), a merged n-gram + model tree
(`merged_qwen`), drafts with another vocabulary (Gemma, SmolLM2) through Token-Level Intersection (TLI: only
tokens both vocabularies spell the same are drafted), the target with layers skipped as its own draft (LayerSkip / Draft & Verify, `qwen_skip`), and
EAGLE-2's dynamic tree over the draft model's probabilities (`eagle2`).

**Tree attention.** One mask function builds the additive mask from the parent pointers: each node attends to
the whole prefix, to itself and to its ancestors (its row is its parent's row plus itself, as in EAGLE), and
its position id is prefix length + depth. The target scores all N+1 nodes in one forward over its prefix
cache; afterwards both caches keep only the root and the accepted path.

**Verification.** Greedy accepts the longest path whose tokens equal the target's argmax and appends the
target's next token (the bonus). The lossless sampling modes use rejection sampling against the target
distribution: `speculative` (Leviathan et al.; Chen et al.) on chains, `mss` (SpecInfer) and `sequoia` on trees,
`block` (block verification) on chains and `traversal` (traversal verification) on trees, which accept whole
paths instead of token by token; the lossy rules (`typical` and the seed rules such as
p_target ≥ p_draft) accept more but drift from the target distribution, which `first_token_tv` measures.

**Engines.** `live` runs real speculative decoding and measures wall time. `replay` is exact for greedy
verification in float32: from one cached target greedy continuation and one teacher-forced draft forward per
prompt it derives every static shape and budget; n-gram, merged and dynamic (EAGLE-2) drafters run for real
against the cached continuation, with no target forward (tests check that both reproduce the live step records)."""

METRICS = """\
Per decode step (a row of `steps.csv`): `tree_size` = draft tokens N verified in the step; `accepted` = draft
tokens accepted, **excluding** the bonus/correction token; `emitted` = tokens appended (normally accepted + 1,
less only at EOS or the length limit).

Per configuration (a row of `summary.csv`):
- `acceptance_rate` = Σ accepted / Σ tree_size (verified tokens ÷ all draft tokens).
- `acceptance_length` = mean `accepted` per step — the bonus token is **not** counted.
- `tokens_per_step` = mean `emitted` per step — the bonus token **is** counted (Spec-Bench's τ).
- `alpha_d` = P(accepted ≥ d | accepted ≥ d−1 and tree_depth ≥ d), the per-depth conditional acceptance (EAGLE).
- `first_token_tv` = mean total-variation distance between the mode's first-token output distribution and
  the target's (zero for lossless modes).
- Brackets give 95% bootstrap confidence intervals, resampling prompts (seeded).

**Comparisons.** Two configurations are compared only when they ran the same dataset at the same temperature,
dtype and max_new_tokens, and only on the prompts both ran (from steps.csv); T=0 and T>0 are never ranked
together. Over a prompt set P, tokens_per_step(P) = Σ_P emitted ÷ Σ_P steps (ratio of sums, as in summary.csv).
A difference Δ = tokens_per_step_a(P) − tokens_per_step_b(P) on the shared prompts P carries a 95% paired
bootstrap interval: P is resampled with replacement, the same resample for both configurations
(`scipy.stats.bootstrap`, percentile, seeded, 10000 draws). "(includes 0)" marks an interval that contains zero:
that difference is not resolved by these prompts. These intervals are not adjusted for the number of comparisons;
the comparisons fixed in advance (T>0 rules against their baselines) carry Holm-adjusted ones."""

SPEED = """\
**Speed.** Measured speedup = live tokens/s ÷ the tokens/s of the live plain-decoding baseline (tree none) with
the same pair, dataset, dtype, max_new_tokens, batch size and prompts. Projected speedup = Σ emitted × t_target(1)
÷ Σ over steps of the step's own cost, with t_role(n) the median of interleaved repeated forwards of n query
tokens on this machine (results/costs.csv; results/environment.json names the machine), and its 95% interval from
a joint bootstrap over prompts and over every cost point's repeats. {rule} Prefill is ignored. A replayed
configuration with a live batch-1 twin (same pair, data, tree and rule) is ranked by the twin's measured
speedup; the answer says which basis each row has."""

EVIDENCE = """\
**Evidence rules.** A ranked or "best" claim rests on at least {ranked} prompts, else it is listed as
exploratory; an interval from fewer than {ci} prompts is not printed (a bootstrap over 3 prompts has 10 distinct
resamples). A budget is ranked only if at most {cut} of its steps were cut by max_new_tokens (a cut step reached
the cap and emitted fewer than accepted + 1 tokens). A Sequoia tree is ranked only if its acceptance vector was
calibrated on prompts disjoint from the scored ones. T=0 and T>0 rows are never ranked together."""

GAP = """\
For each pair and dataset with a measured greedy acceptance vector P (rank k's acceptance probability), the
Sequoia dynamic program predicts the best static tree's tokens per step at each budget, 1 + max over trees of
Σ_nodes Π_path P[rank], and the same sum for each measured shape. The DP assumes acceptance independent across
depths and ignores the end of a decode, so its values are predictions, not bounds: a shape can measure above
them."""

REFERENCES = """\
1. Y. Leviathan, M. Kalman, Y. Matias. *Fast Inference from Transformers via Speculative Decoding.* ICML 2023.
2. C. Chen, S. Borgeaud, G. Irving, J.-B. Lespiau, L. Sifre, J. Jumper. *Accelerating Large Language Model
   Decoding with Speculative Sampling.* arXiv:2302.01318, 2023.
3. X. Miao et al. *SpecInfer: Accelerating Large Language Model Serving with Tree-based Speculative Inference
   and Verification.* ASPLOS '24. doi:10.1145/3620666.3651335.
4. Z. Chen et al. *Sequoia: Scalable, Robust, and Hardware-aware Speculative Decoding.* arXiv:2402.12374, 2024.
5. Y. Li, F. Wei, C. Zhang, H. Zhang. *EAGLE-2: Faster Inference of Language Models with Dynamic Draft Trees.*
   EMNLP 2024.
6. T. Cai et al. *Medusa: Simple LLM Inference Acceleration Framework with Multiple Decoding Heads.* ICML 2024.
7. H. Xia et al. *Unlocking Efficiency in Large Language Model Inference: A Comprehensive Survey of
   Speculative Decoding* (Spec-Bench). Findings of ACL 2024.
8. Y. Li, F. Wei, C. Zhang, H. Zhang. *EAGLE: Speculative Sampling Requires Rethinking Feature Uncertainty.*
   ICML 2024.
9. Y. Li, F. Wei, C. Zhang, H. Zhang. *EAGLE-3: Scaling up Inference Acceleration of Large Language Models via
   Training-Time Test.* arXiv:2503.01840, 2025.
10. Z. Sun et al. *Block Verification Accelerates Speculative Decoding.* ICLR 2025.
11. Y. Weng et al. *Traversal Verification for Speculative Tree Decoding.* 2025.
12. N. Timor et al. *Accelerating LLM Inference with Lossless Speculative Decoding Algorithms for Heterogeneous
    Vocabularies* (TLI, cross-vocabulary drafting). ICML 2025, arXiv:2502.05202.
13. M. Elhoushi et al. *LayerSkip: Enabling Early Exit Inference and Self-Speculative Decoding.* ACL 2024;
    J. Zhang et al. *Draft & Verify: Lossless Large Language Model Acceleration via Self-Speculative Decoding.*
    ACL 2024.
14. A. Saxena. *Prompt Lookup Decoding.* github.com/apoorvumang/prompt-lookup-decoding, 2023.
15. J. Dong, B. Feng, D. Guessous, Y. Liang, H. He. *Flex Attention: A Programming Model for Generating Optimized
    Attention Kernels* (FlexAttention). arXiv:2412.05496, 2024.
16. SPEED-Bench: the per-position conditional acceptance and acceptance-length histogram format used for the
    acceptance figures."""

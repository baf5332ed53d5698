"""Cross-field checks of a job spec (no model needed): registries, child-rule
compatibility, paired modes, and which engine runs it.  ``validate(job)`` is the
one call before any model loads (``jobspec.from_config`` reads the config; the keys are
the groups' schemas' to check, ``core.options``, and the top-level ones ``argv.check_keys``').

Imports: ``study.job.jobspec``, the drafter, tree and verify registries and ``inputs.models``."""

from __future__ import annotations

from ...drafting.drafters import DRAFTERS, check_supported
from ...inputs.models import resolve_device
from ...trees.policies import make_policy, policy_spec
from ...verify.modes import MODES, get_mode
from ...verify.modespec import COMMON_DEFAULTS, ModeSpec, check_compatible, fits
from .errors import ConfigError
from .jobspec import JobSpec, VerifySpec


# --------------------------------------------------------------------------
# cross-field checks (no model needed)
# --------------------------------------------------------------------------
def check_registries(job: JobSpec) -> ModeSpec:
    """Tree policy, verification mode and drafter exist and fit together; returns the
    mode spec.  The ONE place the study layer asks the engine's registries about a job."""
    policy = make_policy(job.tree.name, job.tree.budget, job.tree.params)  # bad params, calibration
    mode = get_mode(job.verify.name, job.verify.params)  # drafts with verify.children
    drafter = DRAFTERS.get(job.pair.drafter)
    check_supported(drafter, policy.kind, policy.name)
    if mode.chain_only and not policy_spec(job.tree.name).chain:
        raise ConfigError(f"verify={job.verify.name} verifies a single chain only: use tree=chain")
    if mode.child_rule == "topk" and job.verify.draft_temperature <= 0:
        raise ConfigError(
            f"verify.draft_temperature=0 with verify={job.verify.name}: top-k siblings "
            "would tie; use verify.draft_temperature=1 (the ranking is the same at any T > 0)"
        )
    tree_rule = drafter.child_rule(policy.kind, mode.child_rule)
    check_compatible(mode, tree_rule, policy_spec(job.tree.name).chain)
    check_paired(job, mode, tree_rule)
    return mode


def paired_fits(mode, other, tree_rule: str, chain: bool) -> bool:
    """Whether ``other`` may verify the trees drafted for ``mode`` (same child rule; a
    mode with ``verify.children`` drafts like the primary, see ``paired_params``)."""
    if mode.child_rule in other.draft_rules:
        other = other.configured({"children": mode.child_rule})
    return other.child_rule == mode.child_rule and fits(other, tree_rule) and (chain or not other.chain_only)


def check_paired(job: JobSpec, mode, tree_rule: str) -> None:
    """verify.paired_with: every mode chooses children like the primary and fits its trees."""
    chain = policy_spec(job.tree.name).chain
    for name in job.verify.paired_with:
        try:
            other = get_mode(name)
        except KeyError as e:  # registry.UnknownName: lists the valid names
            raise ConfigError(f"verify.paired_with: {e}") from None
        if not paired_fits(mode, other, tree_rule, chain):
            fit = [n for n in MODES.names() if paired_fits(mode, MODES.get(n), tree_rule, chain)]
            raise ConfigError(
                f"verify.paired_with: {name} cannot verify the trees drafted for "
                f"verify={job.verify.name} on tree={job.tree.name}; modes that fit: {', '.join(fit)}"
            )


def paired_params(verify: VerifySpec, name: str):
    """A paired mode's parameters (``verify``: the job's verify spec): its defaults with the
    primary's temperatures and top-p (the target rows are shared, so these must be too), the
    primary's child rule (``verify.children``) where the paired mode has that parameter, and
    the primary's sibling order (``verify.order``) where both have one."""
    other, shared = get_mode(name), {k: verify.params[k] for k in COMMON_DEFAULTS}
    rule = get_mode(verify.name, verify.params).child_rule
    if rule in other.draft_rules:
        shared["children"] = rule
    if "order" in other.defaults and "order" in verify.params:
        shared["order"] = verify.params["order"]
    return other.params(shared)


def argmax(mode: str) -> bool:
    """Whether a (registered) mode declares its verdict the target's argmax (``ModeSpec.argmax``)."""
    return mode in MODES and MODES.get(mode).argmax


def why_not_replayable(job: JobSpec, bf16_continuation: bool = False) -> str | None:
    """None when replay is exact for this job, else the reason.  ``bf16_continuation``:
    also accept bfloat16, where replay's reference is DEFINED as the target's batched bf16
    continuation (docs/engines.md: how far live bf16 decoding is from it is measured)."""
    if not argmax(job.verify.name):
        return f"verify={job.verify.name} is not greedy"
    if job.verify.paired_with:
        return "verify.paired_with needs the target's distributions at every node"
    if job.verify.temperature != 0.0:
        return "verify.temperature != 0 (first_token_tv would need the target's distributions)"
    if job.dtype != "float32" and not (bf16_continuation and job.dtype == "bfloat16"):
        return (
            f"dtype={job.dtype}: replay equals live only in float32 (bf16 tree and "
            "teacher-forced forwards round differently and can reorder draft ranks)"
        )
    return None


def resolve_engine(job: JobSpec) -> str:
    """live or replay: ``engine=auto`` replays where exact (greedy, float32); ``engine=replay`` also
    in bfloat16, where the reference is the batched bf16 continuation; elsewhere an error."""
    reason = why_not_replayable(job)
    if job.engine == "replay" and why_not_replayable(job, bf16_continuation=True) is not None:
        raise ConfigError(
            f"engine=replay needs greedy verification in float32 (exact) or bfloat16 (the "
            f"batched continuation) ({reason}): use engine=live or engine=auto"
        )
    return "replay" if job.engine == "replay" or (job.engine == "auto" and reason is None) else "live"


def check_temperature(job: JobSpec) -> None:
    """A deterministic (argmax) rule at T > 0 is refused: its row would say temperature=0.7
    over T=0 outputs."""
    for name in (job.verify.name, *job.verify.paired_with):
        if argmax(name) and job.verify.temperature > 0:
            raise ConfigError(
                f"verify.temperature={job.verify.temperature:g} with {name}: greedy verification "
                f"is the target's argmax (T=0) whatever the temperature; use verify.temperature=0, "
                f"or a sampling mode at T > 0 (e.g. verify=mss or verify=sequoia)"
            )


def check_device(job: JobSpec) -> None:
    """The job's device exists here (``device=bogus``, ``device=cuda`` on a CPU build: one line)."""
    try:
        resolve_device(job.device)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def validate(job: JobSpec) -> tuple[str, ModeSpec]:
    """Every check that needs no model: returns (engine, mode spec)."""
    check_temperature(job)
    check_device(job)
    info = check_registries(job)
    return resolve_engine(job), info


def check_context(job: JobSpec, contexts: dict, prompts) -> None:
    """prompt + max_new_tokens + a tree of tree.budget nodes must fit both models' positions
    (``contexts``: {role: positions or None}, ``inputs.models.pair_contexts``)."""
    for role, n in contexts.items():
        for pr in prompts if n else []:
            need = len(pr.ids) + job.max_new_tokens + job.tree.budget
            if need > n:
                raise ConfigError(
                    f"dataset {job.dataset.name}: prompt '{pr.id}' has {len(pr.ids)} tokens; with "
                    f"max_new_tokens={job.max_new_tokens} and tree.budget={job.tree.budget} that is {need} "
                    f"positions > the {role}'s {n}: {context_fix(job, len(pr.ids), n)}"
                )


def context_fix(job: JobSpec, prompt_len: int, n: int) -> str:
    """The real fix: lower whichever of tree.budget / max_new_tokens can make room; refusing
    long prompts (dataset.max_prompt_tokens) only where that leaves a positive limit."""
    room = n - prompt_len
    fixes = []
    if room - job.max_new_tokens >= 1 and job.tree.budget > room - job.max_new_tokens:
        fixes.append(f"lower tree.budget to {room - job.max_new_tokens} or less")
    if room - job.tree.budget >= 1:
        fixes.append(f"lower max_new_tokens to {room - job.tree.budget} or less")
    if not fixes and room > 1:
        fixes.append(f"lower tree.budget and max_new_tokens to {room - 1} positions together")
    limit = n - job.max_new_tokens - job.tree.budget
    if limit >= 1:
        fixes.append(f"or set dataset.max_prompt_tokens={limit} to refuse such prompts")
    return ", ".join(fixes) or "use a model with a longer context or a shorter prompt"

"""Cross-field checks of a job spec (no model needed): registries, child-rule
compatibility, paired modes, and which engine runs it.  ``validate(job)`` is the
one call before any model loads (``jobspec.from_config`` reads the config)."""
from __future__ import annotations

from .jobspec import CHAIN_TREES, ConfigError, JobSpec


# --------------------------------------------------------------------------
# cross-field checks (no model needed)
# --------------------------------------------------------------------------
def check_registries(job: JobSpec):
    """Tree policy, verification mode and drafter exist and fit together; returns the
    mode spec.  The ONE place the study layer asks the engine's registries about a job."""
    from ..drafting.drafters import DRAFTERS, check_supported
    from ..verify.modespec import check_compatible
    from ..trees.policies import make_policy
    from ..verify.modes import get_mode
    policy = make_policy(job.tree.name, job.tree.budget, job.tree.params)   # bad params, calibration
    mode = get_mode(job.verify.name, job.verify.params)      # drafts with verify.children
    drafter = DRAFTERS.get(job.pair.drafter)
    check_supported(drafter, policy.kind, policy.name)
    if mode.chain_only and job.tree.name not in CHAIN_TREES:
        raise ConfigError(f"verify={job.verify.name} verifies a single chain only: use tree=chain")
    if mode.child_rule == "topk" and job.verify.draft_temperature <= 0:
        raise ConfigError(f"verify.draft_temperature=0 with verify={job.verify.name}: top-k siblings "
                          "would tie; use verify.draft_temperature=1 (the ranking is the same at any T > 0)")
    tree_rule = drafter.child_rule(policy.kind, mode.child_rule)
    check_compatible(mode, tree_rule)
    check_paired(job, mode, tree_rule)
    return mode


def paired_fits(mode, other, tree_rule: str, chain: bool) -> bool:
    """Whether ``other`` may verify the trees drafted for ``mode`` (same child rule; a
    mode with ``verify.children`` drafts like the primary, see ``paired_params``)."""
    from ..verify.modespec import fits
    if mode.child_rule in other.draft_rules:
        other = other.configured({"children": mode.child_rule})
    return other.child_rule == mode.child_rule and fits(other, tree_rule) and (chain or not other.chain_only)


def check_paired(job: JobSpec, mode, tree_rule: str) -> None:
    """verify.paired_with: every mode chooses children like the primary and fits its trees."""
    from ..verify.modes import MODES, get_mode
    chain = job.tree.name in CHAIN_TREES
    for name in job.verify.paired_with:
        try:
            other = get_mode(name)
        except KeyError as e:                      # registry.UnknownName: lists the valid names
            raise ConfigError(f"verify.paired_with: {e}") from None
        if not paired_fits(mode, other, tree_rule, chain):
            fit = [n for n in MODES.names() if paired_fits(mode, MODES.get(n), tree_rule, chain)]
            raise ConfigError(f"verify.paired_with: {name} cannot verify the trees drafted for "
                              f"verify={job.verify.name} on tree={job.tree.name}; modes that fit: {', '.join(fit)}")


def paired_params(job: JobSpec, name: str) -> dict:
    """A paired mode's parameters: its defaults with the primary's temperatures and top-p
    (the target rows are shared, so these must be too), the primary's child rule
    (``verify.children``) where the paired mode has that parameter, and the primary's
    sibling order (``verify.order``) where both have one."""
    from ..verify.modes import get_mode
    from ..verify.modespec import COMMON_DEFAULTS
    other, shared = get_mode(name), {k: job.verify.params[k] for k in COMMON_DEFAULTS}
    rule = get_mode(job.verify.name, job.verify.params).child_rule
    if rule in other.draft_rules:
        shared["children"] = rule
    if "order" in other.defaults and "order" in job.verify.params:
        shared["order"] = job.verify.params["order"]
    return other.params(shared)


def why_not_replayable(job: JobSpec) -> str | None:
    """None when replay is exact for this job, else the reason."""
    if job.verify.name != "greedy":
        return f"verify={job.verify.name} is not greedy"
    if job.verify.paired_with:
        return "verify.paired_with needs the target's distributions at every node"
    if job.verify.temperature != 0.0:
        return "verify.temperature != 0 (first_token_tv would need the target's distributions)"
    if job.dtype != "float32":
        return (f"dtype={job.dtype}: replay equals live only in float32 (bf16 tree and "
                "teacher-forced forwards round differently and can reorder draft ranks)")
    return None


def resolve_engine(job: JobSpec) -> str:
    """live or replay: ``engine=auto`` replays where exact; ``engine=replay`` elsewhere is an error."""
    reason = why_not_replayable(job)
    if job.engine == "replay" and reason is not None:
        raise ConfigError(f"engine=replay is exact only for greedy verification in float32 "
                          f"({reason}): use engine=live or engine=auto")
    return "replay" if job.engine == "replay" or (job.engine == "auto" and reason is None) else "live"


def validate(job: JobSpec) -> tuple[str, object]:
    """Every check that needs no model: returns (engine, mode spec)."""
    from ..inputs.models import resolve_device
    try:
        resolve_device(job.device)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    info = check_registries(job)
    return resolve_engine(job), info

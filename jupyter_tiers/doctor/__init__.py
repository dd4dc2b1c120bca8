"""``jupyter tiers doctor [PROFILE...]`` (also ``%tiers doctor``): first-contact checks of profiles,
one line each, OK / WARN / FAIL with the fix in words.

Layout: :mod:`.model` (the report's data), :mod:`.render` (text and JSON, pure), and per tier an
I/O probe module returning small dataclasses (:mod:`.slurm_probe`, :mod:`.k8s_probe`,
:func:`.local.probe`) with a pure module judging them (:mod:`.slurm_checks` and its parsers
:mod:`.slurm_parse`, :mod:`.k8s_checks`, :func:`.local.local_checks`); a profile's
``object_store`` likewise (:mod:`.objectstore_probe`, running :mod:`.s3_check_script` where
uploads run, and :mod:`.objectstore_checks`). :func:`run_doctor` ties
them together; :data:`SECTION_CHECKS` is where a profile section's own checks plug in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..api import cached
from ..config.profiles import ENV_VAR, TRUST_ENV_VAR, TRUST_KEY, Config, Profile
from ..slurm.tier import SlurmTier
from . import k8s_probe, local, slurm_probe
from .k8s_checks import TIER_ACCESS, k8s_checks, role_yaml
from .model import Check, ProfileReport, Report, Status, fail, skip
from .objectstore_probe import object_store_checks
from .slurm_checks import slurm_checks


def _object_store(profile: Profile) -> list[Check]:
    return object_store_checks(profile)


# Checks of an optional profile section, run when a profile has that key: {section: checks}.
# ``object_store``: credentials, endpoint, bucket, and a test object written, read back and
# deleted where the profile's uploads run (:mod:`.objectstore_probe`, :mod:`.objectstore_checks`).
SECTION_CHECKS: dict[str, Callable[[Profile], list[Check]]] = {"object_store": _object_store}


def check_profile(profile: Profile, *, suggest_role: bool = False, compute: bool = False) -> ProfileReport:
    """Every check of one profile, by its tier; then its sections' (:data:`SECTION_CHECKS`).

    A profile that only an untrusted project ./tiers.yaml defines runs nothing (no interpreter,
    no login, no object store probe): one FAIL says how to opt in."""
    if profile.project_defined:
        where = profile.sources[-1] if profile.sources else "a project tiers.yaml"
        return ProfileReport(profile.name, profile.tier, (fail(
            "project file", f"{profile.name} is defined only by {where}, a project file (it may have "
            "come with a cloned repository); the doctor runs nothing from it",
            f"to check it, set {TRUST_KEY}: true in ~/.jupyter/tiers.yaml, or {TRUST_ENV_VAR}=1, or name "
            f"the file in ${ENV_VAR}"),))
    extra = ""
    if profile.tier == "slurm":
        tier = cached(profile)
        transport = tier.transport if isinstance(tier, SlurmTier) else None
        probed = slurm_probe.probe(profile, transport, compute=compute)
        checks = slurm_checks(probed, profile=profile.name, workdir=profile.workdir,
                              python=str(profile.defaults.get("python") or "python3"),
                              partition=profile.defaults.get("partition"),
                              has_setup=bool(profile.setup))
    elif profile.tier == "kubernetes":
        k8s = k8s_probe.probe(profile)
        checks = k8s_checks(k8s)
        missing = [a for a in TIER_ACCESS if k8s.allowed and not k8s.allowed.get(a, False)]
        if suggest_role and missing:
            extra = role_yaml(missing, k8s.namespace)
    else:
        checks = local.local_checks(local.probe(profile))
    # A Slurm profile's sections are checked from the login node: not when the login failed.
    unreached = profile.tier == "slurm" and not any(c.name in ("login", "this machine")
                                                    and c.status is Status.OK for c in checks)
    for section, run in SECTION_CHECKS.items():
        if profile.get(section) is not None:
            checks += [skip(section.replace("_", " "), "checked from the login node, which was not "
                            "reached (see above)")] if unreached else run(profile)
    return ProfileReport(profile.name, profile.tier, tuple(checks), extra)


def run_doctor(config: Config, names: Sequence[str] = (), *, suggest_role: bool = False,
               compute: bool = False) -> Report:
    """The report on ``names`` (default: the default profile); ``compute``: a Slurm profile's
    setup and Python on one compute node too (srun, a one-minute job). A check that raised is a FAIL
    naming the error, so one broken probe does not hide the other profiles."""
    reports = []
    for name in names or [config.default_profile]:
        profile = config.profile(name)
        try:
            reports.append(check_profile(profile, suggest_role=suggest_role, compute=compute))
        except Exception as exc:  # a bug or an unforeseen answer: reported, never a traceback
            reports.append(ProfileReport(profile.name, profile.tier, (fail(
                "doctor", f"the checks stopped: {type(exc).__name__}: {str(exc)[:200]}",
                "run with the same profile again; if it persists, report it with this line"),)))
    return Report(tuple(reports))


__all__ = ["SECTION_CHECKS", "Check", "ProfileReport", "Report", "Status", "check_profile", "run_doctor"]

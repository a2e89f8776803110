"""A spec as the planning commands read it: checked (its errors stop the command), with --calibration and
--slo-on applied, and what `kvplan lint` would report on it said inline on stderr.

Like the CLI, the commands' core loads what only one command needs when that command runs: a spec with
errors never loads the planner, and one with nothing to report never loads the linter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generator, Iterator, Optional, Sequence

import attrs

from kvplan.app.output import Line, Stop, err

if TYPE_CHECKING:
    from kvplan.base.diagnostics import Diagnostic
    from kvplan.lang import CheckResult
    from kvplan.model.profile import Profile
    from kvplan.planner.plan import Plan


def load_calibration(path: str | None) -> Profile | None:
    """The profile --calibration names, read and checked (a located error, exit 2, when it is bad)."""
    if path is None:
        return None
    from kvplan.model.profile import load_profile

    return load_profile(path)


def with_expected(checked: CheckResult, calibration: str | None, slo_on: str) -> CheckResult:
    """The checked spec's scenarios with --calibration (it replaces a deployment's own) and --slo-on applied; a
    profile with no fit for any of the spec's deployments stops the command (exit 2), never silently ignored."""
    profile = load_calibration(calibration)
    if profile is None and slo_on == "expected":
        return checked
    if profile is not None:
        from kvplan.model.profile import unmatched

        why = unmatched(profile, [(sc.device.id, sc.engine) for sc in checked.scenarios])
        if why is not None:
            raise Stop(f"{why}: calibrate on runs of that device and engine (docs/calibrate.md), or drop "
                       "--calibration")
    return attrs.evolve(checked, scenarios=tuple(
        attrs.evolve(sc, slo_on=slo_on, calibration=profile or sc.calibration) for sc in checked.scenarios))


def checked(path: str, allow_paths: tuple[str, ...] = ()) -> Generator[Line, None, CheckResult]:
    """Check a spec; with errors, say them (concise) on stderr and stop: there is nothing to plan.

    Its config paths may name the spec's folder, the --allow-path folders and [tool.kvplan] allow-paths.
    """
    from kvplan.base.codes import Severity
    from kvplan.lang import check_file
    from kvplan.lang.settings import load_settings  # not kvplan.lang.lint: the linter is not needed here

    result = check_file(path, load_settings(".").with_overrides(allow_paths=allow_paths).allow_paths)
    errors = [d for d in result.diagnostics if d.severity is Severity.ERROR]
    if len(errors) == 1 and errors[0].code.startswith("KV0"):  # unreadable, empty, not .kvp: one line says it
        d = errors[0]
        raise Stop(f"{d.span or path}: {d.code} {d.message}" + (f" ({d.help})" if d.help else ""))
    if errors:
        yield from findings(path, result, allow_paths, errors)
        raise Stop(f"{path} has {len(errors)} error{'s' if len(errors) > 1 else ''}; `kvplan lint {path}` shows "
                   "each in its line")
    return result


def findings(path: str, result: CheckResult, allow_paths: tuple[str, ...], errors: Sequence[Diagnostic] = (),
             plans: Optional[Sequence[Plan]] = None) -> Iterator[Line]:
    """What `kvplan lint` reports on the spec at warning or above, on stderr, each with its help inline: the
    checker's diagnostics and, given the plans advise or emit made, their findings (KV2xx, KV3xx). The settings'
    select and ignore and the file's suppressions apply as in lint; an error that stops the command is said even
    when ignored."""
    from kvplan.base.codes import Severity

    raw = list(result.diagnostics)
    if plans is not None:
        from kvplan.planner.lint import check_plans

        raw += check_plans(result, plans)
    if not any(d.severity.rank >= Severity.WARNING.rank for d in raw) and "kvplan:" not in result.source:
        return  # nothing for lint to print at warning, no suppression to judge: the linter stays unloaded
    from kvplan.lang import lint
    from kvplan.render import diagnostics as diag_view

    settings = lint.load_settings(".").with_overrides(allow_paths=allow_paths)
    report = lint.report(path, result, raw, settings, planned=plans is not None)
    shown = report.diagnostics + tuple(e for e in errors if e not in report.diagnostics)
    yield err(diag_view.inline([attrs.evolve(report, diagnostics=shown)]), nl=False)

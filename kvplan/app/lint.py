"""`kvplan lint`: the checks of .kvp files in CI, the planner's among them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvplan.app.output import Said, err, out
from kvplan.app.requests import LintRequest, PlannerOptions
from kvplan.app.spec import load_calibration, with_expected

if TYPE_CHECKING:
    from kvplan.base.diagnostics import Diagnostic
    from kvplan.lang import CheckResult
    from kvplan.lang.lint import Check


def _lint_checks(planner: PlannerOptions) -> tuple[Check, ...]:
    """Extra per-file checks for `kvplan lint`: each takes a CheckResult, returns Diagnostics.

    The planner's KV2xx/KV3xx rules: it plans every scenario of a file that checks clean, with the
    planner options given (the same as advise's).
    """

    def planner_check(result: CheckResult) -> list[Diagnostic]:
        from kvplan.planner.lint import check  # numpy and the planner load only if a file checks clean

        return check(with_expected(result, planner.calibration, planner.slo_on), **planner.overrides())

    return (planner_check,)


def _digest_check(result: CheckResult) -> list[Diagnostic]:
    from kvplan.app.digest import check_digests

    return check_digests(result)


def lint(req: LintRequest) -> Said:
    """Diagnostics on stdout, the summary on stderr; the exit code of --fail-on."""
    from kvplan.catalog.hub import network
    from kvplan.lang import lint
    from kvplan.render import diagnostics as diag_view

    settings = lint.load_settings(".", req.config).with_overrides(
        select=lint.split_codes(req.select) if req.select else None, ignore=lint.split_codes(req.ignore),
        fail_on=req.fail_on, allow_paths=req.allow_paths)
    load_calibration(req.planner.calibration)  # a bad profile is one located error before any file is linted
    checks = _lint_checks(req.planner) + ((_digest_check,) if req.check_digest else ())
    with network(req.online):
        report = lint.lint_paths(req.paths, settings, checks=checks)
    yield out(diag_view.render(req.output_format, report.files), nl=False)
    yield err(report.summary())
    return report.exit_code()

"""A request workload through the CLI (docs/service.md): advise prints the concurrency, ITL, TTFT and saturation
rate with their evidence, in text and JSON; past saturation advise and lint say so and name the rate; a workload
that mixes the two forms cannot be planned (exit 2, located)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kvplan.cli import main
from kvplan.lang.fixes import offset
from tests.paths import ROOT

EXAMPLE = ROOT / "examples" / "service-rate.kvp"


def _saturated(tmp_path: Path) -> Path:
    text = EXAMPLE.read_text().replace("rate   = 5/s", "rate   = 50/s").replace("devices = auto  ", "devices = 1     ")
    path = tmp_path / "sat.kvp"
    path.write_text(text)
    return path


def test_advise_prints_the_service_figures_with_their_evidence() -> None:
    r = CliRunner().invoke(main, ["advise", str(EXAMPLE)])
    assert r.exit_code == 0, r.output
    for label in ("concurrency", "ITL", "TTFT", "saturation rate"):
        assert re.search(rf"^  {label} +\S+ \S+ +\(derived\)$", r.stdout, re.M), label
    assert "5 req/s of 4,000 input and 512 output tokens" in r.stdout


def test_advise_json_carries_the_load_figures() -> None:
    r = CliRunner().invoke(main, ["advise", str(EXAMPLE), "--format", "json"])
    assert r.exit_code == 0, r.output
    (p,) = json.loads(r.stdout)["plans"]
    load = p["load"]
    assert load["saturated"] is False and load["rate"]["value"] == 5
    for key in ("concurrency", "itl", "ttft", "saturation_rate"):
        assert load[key]["evidence"] == "derived" and "λ = 5/s" in load[key]["source"]
    assert load["itl"]["unit"] == "s" and load["saturation_rate"]["unit"] == "req/s"
    assert p["batch"] == p["choices"]["batch"] >= load["running"]["value"] > p["batch"] - 1


def test_past_saturation_advise_and_lint_say_so_and_name_the_rate(tmp_path: Path) -> None:
    path = _saturated(tmp_path)
    r = CliRunner().invoke(main, ["advise", str(path)])
    assert r.exit_code == 1, r.output
    m = re.search(r"SATURATED: the rate 50 req/s is past the saturation rate (\S+ req/s) \(derived\)", r.stdout)
    assert m and re.search(rf"^  saturation rate +{re.escape(m.group(1))} +\(derived\)$", r.stdout, re.M)
    lint = CliRunner().invoke(main, ["lint", str(path)])
    assert lint.exit_code == 1
    assert re.search(rf"sat\.kvp:14:\d+: KV303 the rate 50 req/s is past the saturation rate {m.group(1)}", lint.output)


def test_a_workload_of_both_forms_cannot_be_planned(tmp_path: Path) -> None:
    path = tmp_path / "mixed.kvp"
    path.write_text(EXAMPLE.read_text().replace("output = 512", "output = 512\n        batch = 8"))
    r = CliRunner().invoke(main, ["advise", str(path)])
    assert r.exit_code == 2 and "Traceback" not in r.output
    lint = CliRunner().invoke(main, ["lint", str(path)])
    assert re.search(r"mixed\.kvp:17:9: KV101 `batch` belongs to the batch/context form", lint.output), lint.output


def test_advise_markdown_has_the_service_table() -> None:
    r = CliRunner().invoke(main, ["advise", str(EXAMPLE), "--format", "markdown"])
    assert r.exit_code == 0, r.output
    assert "| service (load model) | value |" in r.stdout
    assert re.search(r"^\| saturation rate \| [\d.]+ req/s \*\(derived\)\* \|$", r.stdout, re.M), r.stdout


# ------------------------------------------------------------- SLOs on the service (issue 13 item 3)

SLO_EXAMPLE = ROOT / "examples" / "service-slo.kvp"


def test_the_slo_example_lints_clean_and_its_expectations_hold() -> None:
    r = CliRunner().invoke(main, ["lint", str(SLO_EXAMPLE)])
    assert r.exit_code == 0 and "no findings" in r.output, r.output


def test_advise_prints_the_goodput_with_its_evidence_and_what_binds_it() -> None:
    r = CliRunner().invoke(main, ["advise", str(SLO_EXAMPLE)])
    assert r.exit_code == 0, r.output
    m = re.search(r"^  goodput +([\d.]+) req/s +\(derived\)$", r.stdout, re.M)
    sat = re.search(r"^  saturation rate +([\d.]+) req/s +\(derived\)$", r.stdout, re.M)
    assert m and sat and 20 <= float(m.group(1)) < float(sat.group(1))
    assert "goodput: the largest rate meeting the service SLOs on the expected step;" in r.stdout
    # fewer devices were tried and turned down, with the numbers that turned them down
    assert re.search(r"rejected 8 × h100-sxm \(tp 8\): misses the service SLO: ITL under load [\d.]+ ms", r.stdout)
    j = CliRunner().invoke(main, ["advise", str(SLO_EXAMPLE), "--format", "json"])
    (p,) = json.loads(j.stdout)["plans"]
    g = p["load"]["goodput"]
    assert g["unit"] == "req/s" and g["evidence"] == "derived" and "ttft <= 500 ms, itl <= 10 ms" in g["source"]
    assert g["value"] == pytest.approx(float(m.group(1)), rel=1e-3)
    assert p["load"]["goodput_slo"] in ("ttft", "itl", "saturation") and p["choices"]["devices"] == 4
    # the fewest devices in all: 3 data-parallel replicas of 4, where one layout takes 16
    assert "We will run 3 data-parallel replicas of 4 devices, 12 in all." in r.stdout
    assert p["cost"]["devices"]["value"] == 12


def _line(text: str, needle: str) -> int:
    """The 1-based line of the first line holding `needle`."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def _applied(text: str, fix: dict[str, Any]) -> str:
    """`text` with one of lint's JSON fixes applied, its edits from the last to the first, as an editor would."""
    after = text
    for e in sorted(fix["edits"], key=lambda e: (e["range"]["start"]["line"], e["range"]["start"]["column"]),
                    reverse=True):
        a, b = (offset(text, e["range"][k]["line"], e["range"][k]["column"]) for k in ("start", "end"))
        after = after[:a] + e["text"] + after[b:]
    return after


def _missed(tmp_path: Path) -> tuple[Path, str]:
    lines = SLO_EXAMPLE.read_text().replace("devices = auto", "devices = 8   ").splitlines(keepends=True)
    text = "".join(line for line in lines if not line.lstrip().startswith(("regime  ==", "devices ==")))
    path = tmp_path / "missed.kvp"
    path.write_text(text)
    return path, text


def test_a_missed_service_slo_is_unmet_and_each_suggestion_meets_it_when_applied(tmp_path: Path) -> None:
    path, text = _missed(tmp_path)
    r = CliRunner().invoke(main, ["advise", str(path), "--format", "json"])
    assert r.exit_code == 1, r.output
    (p,) = json.loads(r.stdout)["plans"]
    unmet = {u["constraint"]: u for u in p["unmet"]}
    assert set(unmet) == {"itl", "goodput"}, unmet
    assert unmet["itl"]["shortfall"]["value"] == pytest.approx(p["load"]["itl"]["value"] - 0.010)
    lint = CliRunner().invoke(main, ["lint", str(path)])
    itl, rate = _line(text, "itl  <= 10 ms"), _line(text, "rate >= 20/s")
    assert re.search(rf"missed\.kvp:{itl}:9: KV302 ITL under load [\d.]+ ms at 20 req/s", lint.output), lint.output
    assert re.search(rf"missed\.kvp:{rate}:9: KV303 the goodput [\d.]+ req/s is below the SLO rate", lint.output)
    fixes = [f for d in json.loads(CliRunner().invoke(main, ["lint", str(path), "--output-format", "json"]).stdout)[
        "diagnostics"] if d["code"] in ("KV302", "KV303") for f in d["fixes"]]
    titles = {f["title"].split(" (")[0] for f in fixes}
    # `devices` is the total over the replicas (SPEC §12): no split of the 8 meets, so a larger total is offered,
    # in words that name the layout its re-plan chooses (replicas of a layout inside one node, not TP16 across
    # two paying the scale-out link), and `pin replicas = 2` (two replicas of 4 in the same 8) is not
    assert "devices = 16" in titles and "pin replicas = 2" not in titles, fixes
    (dev,) = [f["title"] for f in fixes if f["title"].startswith("devices = 16")][:1]
    assert re.search(r": \d+ replicas × \d+ × h100-sxm \(tp \d\), 16 in all;", dev), dev
    for i, fix in enumerate(fixes):  # each suggestion applied as lint's fix edits the file, then advised again
        after = _applied(text, fix)
        fixed = tmp_path / f"fixed{i}.kvp"
        fixed.write_text(after)
        again = CliRunner().invoke(main, ["advise", str(fixed), "--format", "json"])
        assert again.exit_code == 0, (fix["title"], again.output)
        assert json.loads(again.stdout)["plans"][0]["unmet"] == []


def test_a_percentile_slo_cannot_be_planned_and_says_why(tmp_path: Path) -> None:
    path = tmp_path / "p90.kvp"
    text = SLO_EXAMPLE.read_text().replace("ttft <= 500 ms", "ttft_p90 <= 500 ms")
    path.write_text(text)
    r = CliRunner().invoke(main, ["advise", str(path)])
    assert r.exit_code == 2 and "Traceback" not in r.output
    n = _line(text, "ttft_p90")
    assert re.search(rf"p90\.kvp:{n}:9: .*`ttft_p90` is a percentile, and the load model gives means only", r.output)


def test_slo_on_bound_checks_the_service_slos_on_the_bound_step(tmp_path: Path) -> None:
    path, _ = _missed(tmp_path)
    r = CliRunner().invoke(main, ["advise", str(path), "--slo-on", "bound"])
    assert r.exit_code == 0, r.output  # the bound step's ITL at 20/s on 8 H100s is far below 10 ms
    assert "goodput: the largest rate meeting the service SLOs on the bound step;" in r.stdout


UNIFORM = ROOT / "examples" / "service-uniform.kvp"


def test_uniform_lengths_through_advise_and_emit() -> None:
    """`input = uniform(2k, 6k)`, `output = uniform(256, 768)`: advise names the distribution and its mean in
    text and JSON, the tail context is the longest input + the longest output, and emit admits that sequence."""
    text = CliRunner().invoke(main, ["advise", str(UNIFORM)])
    assert text.exit_code == 0, text.output
    assert ("5 req/s of uniform 2,000–6,000 (mean 4,000) input and\nuniform 256–768 (mean 512) output tokens"
            in text.stdout)
    r = CliRunner().invoke(main, ["advise", str(UNIFORM), "--format", "json"])
    (p,) = json.loads(r.stdout)["plans"]
    load = p["load"]
    assert "n_in uniform 2,000–6,000 (mean 4,000), n_out uniform 256–768 (mean 512) tokens" in load["ttft"]["source"]
    assert "M/G/1" in load["ttft"]["source"] and load["tail_context"]["value"] == 6000 + 768
    # s̄ = 4,000 + E[n(n − 1)]/(2·E[n − 1]) over n uniform on 256..768, summed here
    outs = range(256, 769)
    s_bar = 4000 + sum(n * (n - 1) for n in outs) / (2 * sum(n - 1 for n in outs))
    assert load["mean_context"]["value"] == pytest.approx(s_bar, rel=1e-12)
    emit = CliRunner().invoke(main, ["emit", str(UNIFORM)])
    assert emit.exit_code == 0, emit.output
    assert re.search(r"--max-model-len 6768\b", emit.stdout)


def test_uniform_lengths_wait_longer_than_their_means_fixed(tmp_path: Path) -> None:
    """The same means as fixed lengths (service-rate.kvp's 4k and 512) at the same plan: the M/G/1 wait is longer."""
    def wait(path: Path) -> float:
        r = CliRunner().invoke(main, ["advise", str(path), "--format", "json"])
        assert r.exit_code in (0, 1), r.output
        return float(json.loads(r.stdout)["plans"][0]["load"]["prefill_wait"]["value"])

    one = UNIFORM.read_text().replace("devices = auto  ", "devices = 1     ")
    fixed = tmp_path / "fixed.kvp"
    fixed.write_text(one.replace("uniform(2k, 6k)", "4k").replace("uniform(256, 768)", "512")
                     .replace("rate   = 5/s", "rate   = 2/s"))
    spread = tmp_path / "spread.kvp"
    spread.write_text(one.replace("rate   = 5/s", "rate   = 2/s"))
    assert wait(spread) > wait(fixed)


@pytest.mark.parametrize("rate, least", [("50/s", 1), ("5/s", 2)])
def test_past_saturation_each_suggestion_gives_a_steady_state_when_applied(tmp_path: Path, rate: str,
                                                                          least: int) -> None:
    """The saturated plan's suggestions are planned before they are printed: each of lint's fixes for the rate
    past saturation (more devices, replicas, a rate below saturation), applied to the file, plans with nothing
    unmet. At 5/s on one H100 (saturation about 3.7/s) two devices (in all: the layout search may split them into
    replicas) and a lower rate each do; `pin replicas = 2` alone does not, the one device being the total."""
    path = _saturated(tmp_path)
    text = path.read_text().replace("rate   = 50/s", f"rate   = {rate}")
    path.write_text(text)
    r = CliRunner().invoke(main, ["advise", str(path), "--format", "json"])
    (p,) = json.loads(r.stdout)["plans"]
    (u,) = [u for u in p["unmet"] if u["constraint"] == "rate"]
    assert u["suggestions"] and not any("lower the rate, or add" in x for x in u["suggestions"]), u
    diags = json.loads(CliRunner().invoke(main, ["lint", str(path), "--output-format", "json"]).stdout)["diagnostics"]
    fixes = [f for d in diags if d["code"] == "KV303" for f in d["fixes"]]
    titles = {f["title"].split(" (")[0] for f in fixes}
    assert any(t.startswith("workload rate = ") for t in titles) and len(fixes) == len(u["suggestions"]) >= least, \
        titles
    for i, fix in enumerate(fixes):
        after = _applied(text, fix)
        fixed = tmp_path / f"steady{i}.kvp"
        fixed.write_text(after)
        again = CliRunner().invoke(main, ["advise", str(fixed), "--format", "json"])
        assert again.exit_code == 0, (fix["title"], again.output)
        (q,) = json.loads(again.stdout)["plans"]
        assert q["unmet"] == [] and q["load"]["saturated"] is False, fix["title"]


# ------------------------------------------------------------------ values the grammar admits (issue 19, item 4)

def test_a_zero_rate_is_a_located_finding_and_every_other_file_is_still_linted(tmp_path: Path) -> None:
    """On main `rate = 0/s` reached the load model, which raised: lint exited 2 with no file or line, and the
    other file's findings were lost from every format, SARIF included."""
    zero = tmp_path / "zero.kvp"
    zero.write_text(EXAMPLE.read_text().replace("rate   = 5/s", "rate   = 0/s"))
    other = tmp_path / "other.kvp"  # a file with a finding of its own: a fanout that shares no prefix (KV124)
    other.write_text((ROOT / "examples" / "w1-batch1.kvp").read_text().replace("batch   = 1", "batch   = 2\n"
                                                                               "        fanout  = 2"))
    at = (_line(zero.read_text(), "rate   = 0/s"), zero.read_text().splitlines()[
        _line(zero.read_text(), "rate   = 0/s") - 1].index("0/s") + 1)
    res = CliRunner().invoke(main, ["lint", str(zero), str(other), "--output-format", "json"])
    assert res.exit_code == 1, res.output
    diags = json.loads(res.stdout)["diagnostics"]
    (bad,) = [d for d in diags if d["path"] == str(zero)]
    assert (bad["code"], bad["message"]) == ("KV108", "rate = 0/s is out of range")
    assert (bad["range"]["start"]["line"], bad["range"]["start"]["column"]) == at
    assert "rate must be above 0/s" in bad["help"]
    assert [d["code"] for d in diags if d["path"] == str(other)] == ["KV124"]
    sarif = json.loads(CliRunner().invoke(main, ["lint", str(zero), str(other), "--output-format", "sarif"]).stdout)
    uris = sorted((r["ruleId"], r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"])
                  for r in sarif["runs"][0]["results"])
    assert [u[0] for u in uris] == ["KV108", "KV124"] and uris[0][1].endswith("zero.kvp") and \
        uris[1][1].endswith("other.kvp"), uris
    (fix,) = bad["fixes"]  # lint's fix, applied as an editor would, lints clean and plans
    zero.write_text(_applied(zero.read_text(), fix))
    assert "rate   = 20/s" in zero.read_text()
    again = CliRunner().invoke(main, ["lint", str(zero)])
    assert again.exit_code == 0, again.output
    assert CliRunner().invoke(main, ["advise", str(zero)]).exit_code == 0


@pytest.mark.parametrize("command", ["advise", "emit", "sweep", "pareto"])
def test_a_zero_rate_is_the_same_located_error_for_every_command(tmp_path: Path, command: str) -> None:
    zero = tmp_path / "zero.kvp"
    zero.write_text(EXAMPLE.read_text().replace("rate   = 5/s", "rate   = 0/s"))
    res = CliRunner().invoke(main, [command, str(zero)])
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert re.search(r"zero\.kvp:\d+:\d+: KV108 rate = 0/s is out of range", res.stderr), res.stderr


_NUMBER = re.compile(r"(?:=|<=|>=|==|<|>)\s*(\d+(?:\.\d+)?)")


@pytest.mark.parametrize("example", ["service-rate.kvp", "service-slo.kvp", "service-uniform.kvp",
                                     "language-reference.kvp"])
def test_every_number_of_an_example_set_to_zero_lints_to_located_findings(tmp_path: Path, example: str) -> None:
    """The grammar admits 0 for every number: each is a located finding or a plan, never an exit 2 without a
    file and line (on main `rate = 0/s` was, and every other file's results were lost)."""
    src = (ROOT / "examples" / example).read_text()
    for m in _NUMBER.finditer(src):
        text = src[:m.start(1)] + "0" + src[m.end(1):]
        path = tmp_path / example
        path.write_text(text)
        res = CliRunner().invoke(main, ["lint", str(path), "--output-format", "json"])
        where = f"{example}: {src[:m.start(1)].splitlines()[-1].strip()}0"
        assert res.exit_code in (0, 1), (where, res.output)
        assert all(d["range"]["start"]["line"] >= 1 for d in json.loads(res.stdout)["diagnostics"]), where

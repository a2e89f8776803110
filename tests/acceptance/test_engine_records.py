"""The engines' facts are one catalog record each (kvplan.catalog.engines): the tests that run the kvplan command.

Split by layer from the tests of the same subject in tests/unit/catalog/test_engine_records.py,
tests/unit/app/test_engine_records.py, tests/unit/lang/test_engine_records.py;
tests/unit/app/test_engine_records.py says what they check.
"""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from kvplan.app.replan import emit
from kvplan.cli import main
from kvplan.engines import default_targets
from kvplan.lang import check_source
from kvplan.planner import plans_for
from tests.unit.app import test_engine_records as unit_engine_records
from tests.unit.app.test_engine_records import TOY
from tests.unit.lang.test_engine_records import TOY_SPEC

toy = unit_engine_records.toy  # the fixture of tests/unit/app/test_engine_records.py; pytest finds it here by name


def test_a_toy_engine_is_one_record_and_one_module(toy: None, tmp_path: Path) -> None:
    # the language
    result = check_source(TOY_SPEC, "toy.kvp")
    assert result.ok, [f"{d.code} {d.message}" for d in result.diagnostics]
    assert result.scenarios[0].engine == "toy"
    # the planner: the record's only page size, its default, is what it plans with
    (p,) = plans_for(result)
    assert p.block_size == 48 and p.kv_dtype.id == "int8"
    # an unpinned dtype stays among the record's
    (q,) = plans_for(check_source(TOY_SPEC.replace("        kv_dtype = int8\n", ""), "toy.kvp"))
    assert q.kv_dtype.id in TOY.kv_dtypes
    # emit, by the spec's engine and by --target
    assert default_targets("toy") == ("toy",)
    spec_file = tmp_path / "toy.kvp"
    spec_file.write_text(TOY_SPEC, encoding="utf-8")
    for args in ([], ["--target", "toy"]):
        r = CliRunner().invoke(main, ["emit", str(spec_file), *args])
        assert r.exit_code == 0, r.output
        assert "toy serve meta-llama/" in r.output and "--kv i8 --page 48 --seqs 16 --ctx 8000 --tp 1" in r.output
    # and back: kvplan import --from toy
    out = emit(p, "toy", spec="toy.kvp")
    r = CliRunner().invoke(main, ["import", "--from", "toy", "--device", "h100-sxm", out.files[0].text])
    assert r.exit_code == 0, r.output
    assert re.search(r"engine += toy", r.output)
    imported = check_source(r.output, "imported.kvp")
    assert imported.ok, [f"{d.code} {d.message}" for d in imported.diagnostics]
    pins = {k: pin.value for k, pin in imported.scenarios[0].pins.items()}
    assert pins["kv_dtype"] == "int8" and pins["block_size"] == 48

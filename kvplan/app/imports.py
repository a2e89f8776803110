"""`kvplan import`: the .kvp equivalent of an existing deployment, on stdout or written with its copies."""

from __future__ import annotations

import os

from kvplan.app.output import EXIT_CLEAN, Said, err, out
from kvplan.app.requests import ImportRequest


def import_spec(req: ImportRequest) -> Said:
    """The spec kvplan.app.importer writes from the engine's flags; its warnings on stderr."""
    from kvplan.app import importer

    text, base_dir, what, source_path = importer.read_source(req.source)
    output = req.output
    opts = importer.Options(model=req.model_id, model_config=req.model_config, device=req.device_id,
                            batch=req.batch, context=req.context,
                            out_dir=None if output == "-" else (os.path.dirname(output) or "."), source=what,
                            source_path=source_path)
    result = importer.import_deployment(req.engine, text, opts, base_dir)
    for w in result.warnings:
        yield err(f"kvplan: warning: {w}")
    if output == "-":
        yield out(result.text, nl=False)
        return EXIT_CLEAN
    from kvplan.base.outputs import OutputTree, write_file

    if result.copies:  # first, so that the spec never names a file not yet written
        tree = OutputTree(os.path.dirname(output) or ".")
        for rel, copied in result.copies:
            yield err(f"wrote {tree.write(rel.split('/'), copied)}")
    yield err(f"wrote {write_file(output, result.text)}")
    return EXIT_CLEAN

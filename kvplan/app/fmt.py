"""`kvplan fmt`: .kvp files rewritten in the canonical layout, comments kept."""

from __future__ import annotations

import difflib

from kvplan.app.output import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, Said, err, out
from kvplan.app.requests import FmtRequest
from kvplan.base.errors import KvplanError


def fmt(req: FmtRequest) -> Said:
    """Rewrite each file in the canonical layout, or (--check, --diff) say which would change; exit 2 when a file
    could not be formatted, 1 when a dry run finds a change."""
    from kvplan.base.outputs import write_file
    from kvplan.lang import read_spec
    from kvplan.lang.fmt import format_source
    from kvplan.lang.lint import collect

    changed, broken, found = [], 0, collect(req.paths)
    files = [path for path, _ in found]
    for path, root in found:
        try:
            old = read_spec(path, root)  # as lint reads it: a regular file, at most a spec's size, UTF-8
            new = format_source(old, path)
        except KvplanError as exc:
            code = getattr(exc, "code", None)
            yield err(f"{exc.span}: {code} {exc.message}" + (f" ({exc.help})" if exc.help else "")
                      if exc.span is not None and code else str(exc))
            broken += 1
            continue
        if new == old:
            continue
        changed.append(path)
        if req.diff:
            for line in difflib.unified_diff(old.splitlines(True), new.splitlines(True), path, path):
                yield out(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n", nl=False)
        elif req.check:
            yield out(f"would reformat {path}")
        else:
            try:  # a spec that is a link, a hard link or no regular file is refused, not written through
                write_file(path, new, option="fmt")
            except KvplanError as exc:
                yield err(f"kvplan: error: {exc}")
                changed.pop()
                broken += 1
    dry = req.check or req.diff
    n = len(changed)
    verb = "would be reformatted" if dry else "reformatted"
    yield err(f"{n} file{'' if n == 1 else 's'} {verb}, {len(files) - n - broken} unchanged"
              + (f", {broken} not formatted (errors above)" if broken else ""))
    return EXIT_ERROR if broken else EXIT_FINDINGS if dry and changed else EXIT_CLEAN

"""`kvplan models`, `kvplan devices` and `kvplan tables`: the catalogs and the paper's derived tables."""

from __future__ import annotations

from kvplan.app.output import EXIT_CLEAN, Said, out
from kvplan.app.requests import Listing


def models(req: Listing) -> Said:
    """The model catalog."""
    from kvplan import catalog
    from kvplan.render import catalog_view

    yield out(catalog_view.models(list(catalog.models().values()), req.fmt), nl=False)
    return EXIT_CLEAN


def devices(req: Listing) -> Said:
    """The device catalog."""
    from kvplan import catalog
    from kvplan.render import catalog_view

    yield out(catalog_view.devices(list(catalog.devices().values()), req.fmt), nl=False)
    return EXIT_CLEAN


def tables(req: Listing) -> Said:
    """The derived parts of the paper's tables."""
    from kvplan.model import paper
    from kvplan.render import tables_view

    tables, inputs = paper.all_tables(), paper.paper_inputs()
    render = {"text": tables_view.text, "markdown": tables_view.markdown, "json": tables_view.json_text}[req.fmt]
    yield out(render(tables, inputs), nl=False)
    return EXIT_CLEAN

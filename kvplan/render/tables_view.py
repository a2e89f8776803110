"""Render the paper's tables as text, Markdown or contract JSON. Each cell is one
evidence class: [d] derived, [r] reported (footnoted with its citation), [a] assumed."""

from __future__ import annotations

from typing import Sequence

from kvplan import catalog
from kvplan.base.evidence import Value
from kvplan.model.paper import Cell, Table
from kvplan.model.regime import paper_model
from kvplan.render.common import dump_json, table

_MARK = {"derived": "d", "reported": "r", "assumed": "a"}


def _inputs_note(where: str) -> str:
    return f"inputs: the paper's, not the catalog's ({where})"


def _cell(c: Cell, notes: list[str]) -> str:
    if isinstance(c, str):
        return c
    mark = _MARK[c.evidence.value]
    if c.evidence.value == "reported":
        if c.source not in notes:
            notes.append(c.source)
        return f"{c.human} [r{notes.index(c.source) + 1}]"
    return f"{c.human} [{mark}]"


def _title(t: Table) -> str:
    """'Table 5. ...'; a section's part (id '§4.6') is named by its section."""
    return f"{t.id}. {t.title}" if t.id.startswith("§") else f"Table {t.id}. {t.title}"


def params_note() -> str:
    """Why these tables and `kvplan map` differ for Llama-3-70B: the paper's round P against the
    catalog's counted parameters."""

    paper, counted = paper_model(), catalog.get_model("llama-3-70b")
    diff = counted.params / paper.params - 1
    return (f"Llama-3-70B is P = {paper.params / 1e9:g}e9 here, the paper's round figure; `kvplan map`, `advise` "
            f"and `sweep` use the catalog's {counted.params:,.0f} parameters counted from config.json, so their s* "
            f"is {abs(diff):.2%} {'higher' if diff > 0 else 'lower'} than in these tables and their s_cap "
            f"{'lower' if diff > 0 else 'higher'}")


def _inputs_lines(inputs: Sequence[tuple[str, Value]]) -> list[str]:
    return [f"  {k:<20} {v.human:>14} [{_MARK[v.evidence.value]}]  {v.source}" for k, v in inputs]


def text(tables: Sequence[Table], inputs: Sequence[tuple[str, Value]]) -> str:
    out = ["Tables of 'The KV Cache Is the New Memory Wall' (derived parts, recomputed by kvplan)",
           "cells: [d] derived from the equations of docs/model.md, [r#] reported (footnote), [a] assumed input",
           _inputs_note("listed at the end"), ""]
    for t in tables:
        notes: list[str] = []
        rows = [[_cell(c, notes) for c in r] for r in t.rows]
        out.append(_title(t))
        out.append(table(list(t.columns), rows).rstrip("\n"))
        for i, n in enumerate(notes, 1):
            out.append(f"  [r{i}] {n}")
        for n in t.notes:
            out.append(f"  note: {n}")
        out.append("")
    out.append("inputs (the paper's, not the catalog's):")
    out.extend(_inputs_lines(inputs))
    out.append(f"note: {params_note()}")
    return "\n".join(out) + "\n"


def markdown(tables: Sequence[Table], inputs: Sequence[tuple[str, Value]]) -> str:
    out = ["# Tables of the KV-cache paper, recomputed by kvplan", "",
           "Cells: **[d]** derived from the equations of docs/model.md, **[r#]** reported (see the footnote), "
           f"**[a]** assumed input; {_inputs_note('listed at the end')}.", ""]
    for t in tables:
        notes: list[str] = []
        out.append(f"## {_title(t)}")
        out.append("")
        out.append("| " + " | ".join(t.columns) + " |")
        out.append("|" + "|".join("---" for _ in t.columns) + "|")
        for r in t.rows:
            out.append("| " + " | ".join(_cell(c, notes).replace("|", "\\|") for c in r) + " |")
        out.append("")
        for i, n in enumerate(notes, 1):
            out.append(f"- [r{i}] {n}")
        for n in t.notes:
            out.append(f"- note: {n}")
        if notes or t.notes:
            out.append("")
    out.append("## Inputs")
    out.append("")
    out.append("| input | value | evidence | source |")
    out.append("|---|---|---|---|")
    for k, v in inputs:
        out.append(f"| {k} | {v.human} | {v.evidence.value} | {v.source} |")
    out += ["", f"Note: {params_note()}."]
    return "\n".join(out) + "\n"


def payload(tables: Sequence[Table], inputs: Sequence[tuple[str, Value]]) -> dict[str, object]:
    def cell(c: Cell) -> object:
        return c.to_json() if isinstance(c, Value) else {"text": c}

    return {
        "kind": "paper_tables",
        "inputs": dict(inputs),
        "notes": [_inputs_note("under 'inputs'"), params_note()],
        "tables": [
            {"id": t.id, "title": t.title, "columns": list(t.columns),
             "rows": [[cell(c) for c in r] for r in t.rows], "notes": list(t.notes)}
            for t in tables
        ],
    }


def json_text(tables: Sequence[Table], inputs: Sequence[tuple[str, Value]]) -> str:
    return dump_json(payload(tables, inputs))

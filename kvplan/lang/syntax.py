"""Text → typed syntax tree (kvplan.lang.spec); a syntax error → a KvpSyntaxError with an exact span.

The parser is lark's standalone parser of the grammar (kvplan/grammar/kvp.lark),
kvplan/grammar/kvp_parser.py, built once per process. Syntax errors are explained in the user's terms: the
parser's failure is matched against examples of common mistakes (the method
of UnexpectedInput.match_examples) and the terminals it expected are named as
they are written (`}` rather than RBRACE).
"""

from __future__ import annotations

import contextvars
import functools
import os
import re
from typing import Optional, Sequence, Union

from kvplan.base import codes, controls, limits
from kvplan.base.diagnostics import Edit, Fix
from kvplan.base.errors import KvplanError, Span
from kvplan.base.near import close_matches
from kvplan.base.units import UNITS
from kvplan.grammar.kvp_parser import (
    Lark,
    Lark_StandAlone,
    Meta,
    Token,
    Transformer_NonRecursive,
    Tree,
    UnexpectedCharacters,
    UnexpectedInput,
    UnexpectedToken,
    VisitError,
    v_args,
)
from kvplan.lang.spec import (
    SECTIONS,
    Block,
    Bound,
    Call,
    Comment,
    Declaration,
    DeploymentDecl,
    DeviceDecl,
    Entry,
    Ident,
    Item,
    ListValue,
    ModelDecl,
    Quantity,
    Scalar,
    SpecFile,
    String,
    ValueNode,
    Version,
)

#: Declarations a file may hold, as the grammar spells their keywords.
DECLARATIONS = ("deployment", "model", "device")


class KvpSyntaxError(KvplanError):
    """A .kvp file that does not parse; `code` is its KV0xx diagnostic code."""

    def __init__(self, code: str, message: str, *, span: Span, help: Optional[str] = None,
                 fix: Optional[Fix] = None) -> None:
        super().__init__(message, help=help, span=span)
        self.code = code
        self.fix = fix  # the edit, where the explainer knows it exactly (else kvplan.lang.fixes reads the help)


# ------------------------------------------------------------------ parser

_COMMENTS: contextvars.ContextVar[Optional[list[Token]]] = contextvars.ContextVar("kvp_comments", default=None)


def _collect_comment(token: Token) -> Token:
    sink = _COMMENTS.get()
    if sink is not None:
        sink.append(token)
    return token


#: kvplan/grammar/, where the grammar is shipped (a run parses with kvp_parser.py and never reads it).
_GRAMMAR_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "grammar")


def grammar_text() -> str:
    """The grammar as shipped inside the package (kvplan/grammar/kvp.lark), which kvp_parser.py is made from."""
    with open(os.path.join(_GRAMMAR_DIR, "kvp.lark"), encoding="utf-8") as fh:
        return fh.read()


@functools.cache
def parser() -> Lark:
    """The LALR parser, built once per process. COMMENT tokens go to the current parse's sink.

    It is lark's standalone parser of the grammar (kvplan/grammar/kvp_parser.py, written by
    tools/build_parser.py with lark's standalone generator): loading its tables takes a few
    ms where analysing the grammar takes ~250 ms, and kvplan is a CLI run in CI loops. The tables
    are Python literals inside the installed package: no cache is read from (or written to) the
    temporary directory and no pickle is loaded. tests/unit/lang/test_security.py checks that the
    module's rules and terminals are the grammar's.
    """
    # The generated module's entry point is unannotated: it returns its own Lark
    made: Lark = Lark_StandAlone(lexer_callbacks={"COMMENT": _collect_comment})  # type: ignore[no-untyped-call]
    return made


def parse(text: str, path: str) -> SpecFile:
    """Parse .kvp text; raise KvpSyntaxError with a span on the first syntax error."""
    sink: list[Token] = []
    reset = _COMMENTS.set(sink)
    try:
        tree = parser().parse(text)
    except UnexpectedInput as exc:
        raise (not_kvp(text, path) or explain(exc, text, path)) from None
    finally:
        _COMMENTS.reset(reset)
    comments = tuple(Comment(str(t).rstrip(), _token_span(path, t, str(t).rstrip())) for t in sink)
    try:
        spec: SpecFile = _ToSpec(path, text, comments).transform(tree)
    except VisitError as exc:  # never let lark's wrapper escape: the cause is the error
        raise exc.orig_exc from None
    _check_nesting(spec)
    return spec


def _check_nesting(spec: SpecFile) -> None:
    """Refuse the first block (in the file's order) that opens level MAX_NESTING + 1 (kvplan.base.limits)."""
    stack: list[tuple[int, Sequence[Item]]] = [(1, d.items) for d in reversed(spec.declarations)]
    while stack:
        depth, items = stack.pop()
        blocks = [i for i in items if isinstance(i, Block)]
        if blocks and depth >= limits.MAX_NESTING:
            raise KvpSyntaxError(
                codes.SYNTAX_ERROR, f"block `{blocks[0].name}` opens level {depth + 1} of nested blocks; "
                f"blocks nest at most {limits.MAX_NESTING} deep (kvplan's limit, docs/language.md)",
                span=blocks[0].name_span,
                help="a deployment holds its sections (`workload { ... }`, `pin { ... }`) one level down")
        stack.extend((depth + 1, b.items) for b in reversed(blocks))


def parse_all(text: str, path: str, limit: int = 10) -> tuple[Optional[SpecFile], list[KvpSyntaxError]]:
    """Parse, and on a syntax error go on with the next top-level declaration.

    Recovery blanks the failing declaration (from its keyword at the start of
    a line to the next such keyword) and parses again, so later errors keep
    their exact positions. It stops where the failing declaration cannot be
    delimited that way: one good diagnostic beats several confused ones.
    """
    errors: list[KvpSyntaxError] = []
    work = text
    while True:
        try:
            spec = parse(work, path)
        except KvpSyntaxError as exc:
            errors.append(exc)
            blanked = _blank_declaration(work, exc.span.line if exc.span else 0)
            if blanked is None or len(errors) >= limit:
                return None, errors
            work = blanked
            continue
        return (spec if not errors else None), errors


#: Compiled on first use (re caches it), not at import: only a file with a syntax error is recovered.
_DECL_START = r"^(?:deployment|model|device)[ \t]+\""


def _blank_declaration(text: str, line: int) -> Optional[str]:
    """Text with the declaration holding `line` turned to spaces, or None if it has no clear bounds."""
    lines = text.splitlines(keepends=True)
    starts = [i + 1 for i, ln in enumerate(lines) if re.match(_DECL_START, ln, re.M)]
    before = [s for s in starts if s <= line]
    after = [s for s in starts if s > line]
    if not before or not after:
        return None
    lo, hi = before[-1], after[0]
    blank = [re.sub(r"[^\r\n]", " ", ln) if lo <= i + 1 < hi else ln for i, ln in enumerate(lines)]
    return "".join(blank)


# ------------------------------------------------------------- tree → spec

def _token_span(path: str, tok: Token, text: Optional[str] = None) -> Span:
    if text is not None and "\n" not in text:
        return Span(path, tok.line or 1, tok.column or 1, tok.line or 1, (tok.column or 1) + len(text))
    return Span(path, tok.line or 1, tok.column or 1, tok.end_line or 1, tok.end_column or 1)


_ESCAPE = re.compile(r"\\(.)")

#: The children of a named rule (a declaration, a section): its name and its body's items.
_Named = tuple[Token, tuple[Item, ...]]


@v_args(meta=True)
class _ToSpec(Transformer_NonRecursive[Token, SpecFile]):
    """Lark tree → kvplan.lang.spec nodes. Non-recursive: deep nesting must not exhaust the stack.

    Each method gets its rule's children already transformed. A rule whose children have a fixed
    shape in the grammar (kvp.lark) annotates them as that tuple; lark passes a list of that shape.
    """

    def __init__(self, path: str, text: str, comments: tuple[Comment, ...]) -> None:
        super().__init__()
        self.path = path
        self.text = text
        self.comments = comments

    def _span(self, meta: Meta) -> Span:
        if getattr(meta, "empty", True):
            return Span(self.path, 1, 1, 1, 1)
        return Span(self.path, meta.line, meta.column, meta.end_line, meta.end_column)

    def _tspan(self, tok: Token) -> Span:
        return _token_span(self.path, tok)

    def start(self, meta: Meta, children: list[Union[Version, Declaration]]) -> SpecFile:
        versions = tuple(c for c in children if isinstance(c, Version))
        decls = tuple(c for c in children if isinstance(c, Declaration))
        return SpecFile(self.path, versions, decls, self.comments, self._span(meta))

    def version(self, meta: Meta, children: list[Token]) -> Version:
        (number,) = children
        return Version(Quantity(float(number), "", str(number), self._tspan(number)), self._span(meta))

    def _declaration(self, cls: type[Declaration], meta: Meta, children: _Named) -> Declaration:
        name, items = children
        return cls(_unquote(_plain_string(self.path, name)), self._tspan(name), items, self._span(meta))

    def deployment(self, meta: Meta, children: _Named) -> Declaration:
        return self._declaration(DeploymentDecl, meta, children)

    def model_block(self, meta: Meta, children: _Named) -> Declaration:
        return self._declaration(ModelDecl, meta, children)

    def device_block(self, meta: Meta, children: _Named) -> Declaration:
        return self._declaration(DeviceDecl, meta, children)

    def unknown_declaration(self, meta: Meta, children: tuple[Token, Token, tuple[Item, ...]]) -> Declaration:
        word = children[0]
        close = close_matches(str(word), DECLARATIONS, n=1, cutoff=0.5)
        hint = f"did you mean `{close[0]}`?" if close else "a file declares `deployment`, `model` and `device` blocks"
        raise KvpSyntaxError(codes.UNKNOWN_DECLARATION, f"unknown declaration `{word}`",
                             span=self._tspan(word), help=hint)

    def body(self, meta: Meta, children: list[Item]) -> tuple[Item, ...]:
        return tuple(children)

    def assignment(self, meta: Meta, children: tuple[Token, ValueNode]) -> Entry:
        key, value = children
        return Entry(str(key), "=", value, self._span(meta), self._tspan(key))

    def constraint(self, meta: Meta, children: tuple[Token, Token, Scalar]) -> Entry:
        key, op, value = children
        return Entry(str(key), str(op), value, self._span(meta), self._tspan(key))

    def flag(self, meta: Meta, children: list[Token]) -> Entry:
        (key,) = children
        return Entry(str(key), "", None, self._span(meta), self._tspan(key))

    def block(self, meta: Meta, children: _Named) -> Block:
        name, items = children
        cls = SECTIONS.get(str(name), Block)
        return cls(str(name), items, self._span(meta), self._tspan(name))

    def quantity(self, meta: Meta, children: list[Token]) -> Quantity:
        number = children[0]
        unit = str(children[1]) if len(children) > 1 else ""
        return Quantity(float(number), unit, self.text[meta.start_pos:meta.end_pos], self._span(meta))

    def ident(self, meta: Meta, children: list[Token]) -> Ident:
        return Ident(str(children[0]), self._span(meta))

    def string(self, meta: Meta, children: list[Token]) -> String:
        return String(_unquote(_plain_string(self.path, children[0])), self._span(meta))

    def list(self, meta: Meta, children: Sequence[Scalar]) -> ListValue:
        return ListValue(tuple(children), self._span(meta))

    def bound(self, meta: Meta, children: tuple[Token, Quantity]) -> Bound:
        op, limit = children
        return Bound(str(op), limit, self._span(meta))

    def call(self, meta: Meta, children: Sequence[Union[Token, Scalar]]) -> Call:
        name, *args = children
        assert isinstance(name, Token)
        return Call(str(name), tuple(a for a in args if not isinstance(a, Token)), self._span(meta),
                    self._tspan(name))


def _unquote(tok: Union[Token, str]) -> str:
    return _ESCAPE.sub(r"\1", str(tok)[1:-1])


#: A string token's parts: an escape (`\"`, `\\`, a backslash before any other character) or one character.
#: Compiled on first use (re caches it): only a string that holds a control character needs it.
_STRING_PART = r"\\.|."


def _plain_string(path: str, tok: Token) -> Token:
    """`tok`, a STRING token, when it holds no control or bidirectional-formatting character (kvplan.base.controls:
    a name or a path ends up in emitted files, where a carriage return or a line feed starts a line of its own and
    an override shows the text in another order); else KV019 at the first one, fixed by the string without them."""
    raw = str(tok)
    at = controls.first(raw)
    if at is None:
        return tok
    # drop each offending character with the backslash that escapes it; keep the rest as written
    kept = "".join(part for part in re.findall(_STRING_PART, raw, re.S) if controls.first(part) is None)
    n = controls.count(raw)
    more, them = (f" and {n - 1} more", "them") if n > 1 else ("", "it")
    shown = kept if len(kept) <= 60 else f"{kept[:30]}…{kept[-29:]}"
    line, col = tok.line or 1, (tok.column or 1) + at
    help = f"remove {them}: write {shown}"
    raise KvpSyntaxError(codes.CONTROL_CHARACTER, f"this string holds {controls.describe(raw[at])}{more}: names, "
                         "ids and paths may hold no control, line-separator or bidirectional-formatting character",
                         span=Span(path, line, col, line, col + 1), help=help,
                         fix=Fix(help, (Edit(_token_span(path, tok, raw), kept),)))


# ----------------------------------------------------------- syntax errors

#: How each terminal reads in a message.
TERMINALS: dict[str, str] = {
    "NAME": "a name", "NUMBER": "a number", "UNIT": "a unit", "STRING": "a quoted string",
    "OP": "a comparison (`<=`, `>=`, `==`, `<`, `>`)", "_NL": "end of line", "$END": "end of file",
    "LBRACE": "`{`", "RBRACE": "`}`", "LSQB": "`[`", "RSQB": "`]`", "LPAR": "`(`", "RPAR": "`)`",
    "COMMA": "`,`", "EQUAL": "`=`",
    "DEPLOYMENT": "`deployment`", "MODEL": "`model`", "DEVICE": "`device`", "KVPLAN": "`kvplan`",
    "COMMENT": "a comment", "WS": "a space",
}

#: Characters pasted from prose that look like .kvp syntax.
_LOOKALIKES = {"“": '"', "”": '"', "≤": "<=", "≥": ">=", "＝": "=", "–": "-", "—": "-", "×": "x", "：": ":"}

_UNIT_WORDS = frozenset(u for table in UNITS.values() for u in table if u and u.isalpha())

# Mistakes by example (lark's examples/advanced/error_reporting_lalr.py). Each
# snippet is an item-level mistake; _examples() places it where an item can
# stand (in a deployment or a section, first or after another item), because
# match_examples compares the parser's state and the depth of its stack.
_ITEM_MISTAKES: dict[str, Sequence[str]] = {
    codes.MISSING_EQUALS: ["batch 32", "model llama", 'config "x"', "batch [1]", "prefix_caching on"],
    codes.VALUE_WITHOUT_KEY: ["32", "128k", '"x"', "= 1", "[1, 2]", "<= 8"],
    codes.MISSING_VALUE: ["batch =\n", "batch = }", "step_time <=\n", "step_time <= }", "devices = <=\n"],
    codes.MISSING_COMMA: ["batch = [1 8]", "batch = [1k 8]", "x = [a b]", 'x = ["a" "b"]', "x = [1, 2 3]",
                          "x = [\n1\n2]", "x = [1\n2]", "x = [1, 2\n3]", "x = [\n1, 2\n3]", "x = [1 a]",
                          "x = [a 1]"],
    codes.ONE_SETTING_PER_LINE: ["batch = 1 context = 2", "batch = 1k context", "model = a device = b",
                                 'config = "x" params', "x = a b", "x = [1] y", "fits speedup",
                                 "step_time <= 50 ms throughput", "x = <= 8 y"],
}
_TOP_MISTAKES: dict[str, Sequence[str]] = {
    codes.UNQUOTED_NAME: ["deployment chat {", "model my {", "device gpu {", "deployment 1 {", "deployment {"],
    codes.UNMATCHED_BRACE: ["}", 'deployment "d" {\n}\n}'],
}


@functools.cache
def _examples() -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    for label, snippets in _ITEM_MISTAKES.items():
        wrapped = []
        for s in snippets:
            for inner in ("", "workload {\n"):       # in a deployment, in one of its sections
                for before in ("", "x = 1\n"):          # first item, or after another
                    wrapped.append(f'deployment "d" {{\n{inner}{before}{s}')
        out.append((label, wrapped))
    out += [(label, list(s)) for label, s in _TOP_MISTAKES.items()]
    return out


@functools.cache
def _example_errors() -> list[tuple[str, UnexpectedInput]]:
    """Each example's parse error, computed once per process."""
    out = []
    for label, snippets in _examples():
        for snippet in snippets:
            try:
                parser().parse(snippet)
            except UnexpectedInput as exc:
                out.append((label, exc))
    return out


def _accepts(exc: UnexpectedInput) -> Optional[frozenset[str]]:
    accepts = getattr(exc, "accepts", None) if isinstance(exc, UnexpectedToken) else None
    return frozenset(accepts) if accepts else None


def _match_example(exc: UnexpectedInput) -> Optional[str]:
    """The label of the example that failed in the same parser state (and stack depth).

    UnexpectedInput.match_examples with the example errors parsed once, not at
    every error; and lark 1.3's version fails formatting a debug message when
    two errors share a state but not their expected terminals.
    """
    candidate = None
    for label, ex in _example_errors():
        if ex.state != exc.state or _accepts(ex) != _accepts(exc):
            continue
        if getattr(ex, "token", None) == getattr(exc, "token", object()):
            return label  # the same state and the same token: the mistake itself
        candidate = candidate or label
    return candidate


#: Compiled on first use (re caches it), not at import: only a file that does not parse is asked what it is.
_YAML_LINE = r"^(?:---|\.\.\.|- |-$|[A-Za-z_][\w.\-]*[ \t]*:(?:[ \t]|$))"
_KVP_IS = 'a .kvp file is `deployment "name" { ... }` (docs/language.md)'


def not_kvp(text: str, path: str) -> Optional[KvpSyntaxError]:
    """A KV018 error for a file that does not parse and looks like JSON or YAML, else None.

    Called only after a syntax error, so no valid .kvp file is ever taken for one: its first line
    that is not blank or a comment opens a JSON object or array, or reads as YAML (`key: value`,
    `- item`, `---`) with no `{` on it.
    """
    for number, line in enumerate(text.split("\n"), start=1):
        body = line.strip(" \t\r\ufeff")
        if not body or body.startswith("#"):
            continue
        col = len(line) - len(line.lstrip(" \t\r\ufeff")) + 1
        here = Span(path, number, col, number, col + 1)
        if body[0] in "{[":
            return KvpSyntaxError(codes.NOT_KVP, f"this looks like JSON; {_KVP_IS}", span=here,
                                  help='a model\'s config.json is named by a model block: `config = "config.json"`')
        if re.match(_YAML_LINE, body) and "{" not in body:
            return KvpSyntaxError(codes.NOT_KVP, f"this looks like YAML; {_KVP_IS}", span=here,
                                  help="`kvplan import --from trtllm FILE` turns a TensorRT-LLM YAML into a spec")
        return None
    return None


def explain(exc: UnexpectedInput, text: str, path: str) -> KvpSyntaxError:
    """Name a lark syntax error in the user's terms, with the span to point at.

    The cases are tried in priority order: a bad character; the file ending early; a structural
    mistake seen in the tokens around the failure (an unclosed block, a misplaced unit, two
    settings on a line); then the example mistake that fails in the same parser state.
    """
    if isinstance(exc, UnexpectedCharacters):
        return _bad_character(exc, text, path)
    assert isinstance(exc, UnexpectedToken), exc  # LALR raises nothing else
    tok = exc.token
    here = _found_span(path, tok, text)
    expected = sorted(exc.accepts or exc.expected)
    if tok.type == "$END":
        opened = _open_brace(exc)
        if opened is not None:
            return _unclosed(path, opened)
        return KvpSyntaxError(codes.SYNTAX_ERROR, f"the file ends early: expected {_choices(expected)}", span=here)
    prev = _previous_token(exc)
    return (_structural(exc, path, here, expected, prev) or _by_example(exc, path, here, prev)
            or KvpSyntaxError(codes.SYNTAX_ERROR, f"expected {_choices(expected)}, found {_describe(tok)}",
                              span=here))


def _structural(exc: UnexpectedToken, path: str, here: Span, expected: list[str],
                prev: Optional[Token]) -> Optional[KvpSyntaxError]:
    """A mistake the failing token and the one before it show (explain's third step), or None."""
    tok = exc.token
    # A declaration keyword inside a block: the block before it was never closed.
    if tok.type == "STRING" and prev is not None and prev.type == "NAME" and str(prev) in DECLARATIONS:
        opened = _open_brace(exc)
        if opened is not None:
            return _unclosed(path, opened, before=str(prev))
    if tok.type in ("NAME", "UNIT") and prev is not None and prev.type == "NAME" and str(tok) in _UNIT_WORDS:
        return KvpSyntaxError(codes.MISPLACED_UNIT, f"unit `{tok}` stands after the key `{prev}`", span=here,
                              help=f"a unit follows its number, as in `50 {tok}`")
    # `batch = 1 context = 2`: after a number the lexer reads `context` as its unit.
    if tok.type in ("EQUAL", "OP") and prev is not None and prev.type == "UNIT":
        return KvpSyntaxError(codes.ONE_SETTING_PER_LINE, f"expected end of line before `{prev}`",
                              span=_token_span(path, prev), help="write one setting per line")
    if list(expected) == ["LBRACE"]:
        return KvpSyntaxError(codes.SYNTAX_ERROR, f"expected `{{`, found {_describe(tok)}", span=here,
                              help='open the block on the line of its name: `deployment "chat" {`')
    if tok.type in ("RBRACE", "_NL") and "RSQB" in expected and tok.type not in expected:
        opened = _open_brace(exc)
        if opened is not None and opened.type == "LSQB":
            return _unclosed(path, opened)
    return None


def _by_example(exc: UnexpectedToken, path: str, here: Span, prev: Optional[Token]) -> Optional[KvpSyntaxError]:
    """The message for the example mistake that fails in the same parser state (explain's last step), or None."""
    tok = exc.token
    label = _match_example(exc)
    found = _describe(tok)
    key = _last_key(exc)
    if label == codes.MISSING_EQUALS and prev is not None:
        return KvpSyntaxError(label, f"expected `=` between `{prev}` and its value, found {found}", span=here,
                              help=f"write `{prev} = {tok}`")
    if label == codes.VALUE_WITHOUT_KEY:
        return KvpSyntaxError(label, f"{found} has no key", span=here,
                              help="write `key = value`, e.g. `context = 128k`")
    if label == codes.MISSING_VALUE and prev is not None:
        return KvpSyntaxError(label, f"`{key or prev}` has no value", span=_token_span(path, prev, str(prev)),
                              help="write the value on the same line, e.g. `batch = 32`")
    if label == codes.MISSING_COMMA and prev is not None and tok.type == "NAME" and (tok.line or 0) > (prev.line or 0):
        opened = _open_brace(exc)  # `[1, 8` then a setting on the next line: the list was never closed
        if opened is not None and opened.type == "LSQB":
            return _unclosed(path, opened)
    if label == codes.MISSING_COMMA:
        return KvpSyntaxError(label, f"expected `,` or `]` in the list, found {found}", span=here,
                              help="separate list elements with commas: `[1, 8, 32]`")
    if label == codes.ONE_SETTING_PER_LINE:
        return KvpSyntaxError(label, f"expected end of line, found {found}", span=here,
                              help="write one setting per line")
    if label == codes.UNQUOTED_NAME:
        return KvpSyntaxError(label, f"expected a quoted name, found {found}", span=here,
                              help='names are strings: `deployment "chat" {`')
    if label == codes.UNMATCHED_BRACE:
        return KvpSyntaxError(label, "this `}` closes no block", span=here, help="remove it, or open its block")
    return None


def _bad_character(exc: UnexpectedCharacters, text: str, path: str) -> KvpSyntaxError:
    ch = exc.char
    line, col = exc.line, exc.column
    here = Span(path, line, col, line, col + 1)
    if ch == '"':
        rest = text[exc.pos_in_stream:].split("\n", 1)[0].rstrip("\r")
        return KvpSyntaxError(codes.UNCLOSED_STRING, "this string has no closing quote",
                              span=Span(path, line, col, line, col + len(rest)),
                              help='close it on the same line: `config = "models/my-7b/config.json"`')
    prev = (exc.token_history or [None])[-1]
    if ch == ":" and prev is not None and prev.type == "NAME":
        return KvpSyntaxError(codes.MISSING_EQUALS, f"expected `=` after `{prev}`, found `:`", span=here,
                              help=f"settings are written `{prev} = value`")
    if ch in _LOOKALIKES:
        return KvpSyntaxError(codes.SYNTAX_ERROR, f"unexpected character `{ch}`", span=here,
                              help=f"write `{_LOOKALIKES[ch]}` (plain ASCII)")
    expected = sorted(exc.allowed or ())
    shown = repr(ch)[1:-1] if not ch.isprintable() else ch
    return KvpSyntaxError(codes.SYNTAX_ERROR, f"unexpected character `{shown}`"
                          + (f": expected {_choices(expected)}" if expected else ""), span=here)


def _unclosed(path: str, opened: Token, before: Optional[str] = None) -> KvpSyntaxError:
    close = "]" if opened.type == "LSQB" else "}"
    where = f" before `{before}`" if before else (" after the last element" if close == "]" else
                                                  " at the end of its block")
    return KvpSyntaxError(codes.UNCLOSED_BLOCK, f"this `{opened}` is never closed", span=_token_span(path, opened),
                          help=f"add `{close}`{where}")


def _open_brace(exc: UnexpectedToken) -> Optional[Token]:
    """The innermost `{` or `[` still open when the parser failed (it is still on the parser's stack)."""
    for value in reversed(_stack(exc)):
        if isinstance(value, Token) and value.type in ("LBRACE", "LSQB"):
            return value
    return None


def _stack(exc: UnexpectedToken) -> list[Union[Token, Tree[Token]]]:
    ip = exc.interactive_parser
    return list(ip.parser_state.value_stack if ip is not None else getattr(exc.state, "value_stack", []))


def _last_key(exc: UnexpectedToken) -> Optional[str]:
    """The key of the item the parser was in (the last NAME still on its stack)."""
    for value in reversed(_stack(exc)):
        if isinstance(value, Token) and value.type == "NAME":
            return str(value)
    return None


def _previous_token(exc: UnexpectedToken) -> Optional[Token]:
    """The last token the parser took before failing."""
    history = getattr(exc, "token_history", None)
    if history:
        last = history[-1]
        return last if isinstance(last, Token) else None
    for value in reversed(_stack(exc)):
        tok = _last_token(value)
        if tok is not None:
            return tok
    return None


def _last_token(value: Union[Token, Tree[Token]]) -> Optional[Token]:
    """The rightmost token under `value`: a walk with a stack, since a tree may nest thousands deep."""
    todo: list[Union[Token, Tree[Token]]] = [value]
    while todo:
        node = todo.pop()
        if isinstance(node, Token):
            return node
        if isinstance(node, Tree):
            todo.extend(node.children)  # the last child is popped first
    return None


def _found_span(path: str, tok: Token, text: str) -> Span:
    if tok.type == "_NL" or tok.type == "$END":
        # Point just past the last character of the line the parser was on.
        line = tok.line or 1
        lines = text.split("\n")
        if tok.type == "$END":
            line = len(lines)
        col = len(lines[line - 1].rstrip("\r")) + 1 if 0 < line <= len(lines) else 1
        if tok.type == "_NL":
            col = tok.column or col
        return Span(path, line, col, line, col)
    return _token_span(path, tok, str(tok))


def _describe(tok: Token) -> str:
    if tok.type in ("_NL", "$END"):
        return TERMINALS[tok.type]
    if tok.type == "NUMBER":
        return f"the number `{tok}`"
    if tok.type == "STRING":
        return f"the string `{controls.escaped(str(tok))}`"
    return f"`{tok}`"


def _choices(names: Sequence[str]) -> str:
    words = sorted({TERMINALS.get(n, n) for n in names if n not in ("COMMENT", "WS")}, key=_choice_order)
    if not words:
        return "nothing more"
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " or " + words[-1]


def _choice_order(word: str) -> tuple[int, str]:
    return (0 if word.startswith("`") else 1, word)

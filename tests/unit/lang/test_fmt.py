"""kvplan fmt: one canonical layout, comments kept, idempotent, meaning unchanged."""

from __future__ import annotations

import collections
import re
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvplan.base import limits
from kvplan.lang import check_source
from kvplan.lang.fmt import INDENT, format_source
from kvplan.lang.syntax import KvpSyntaxError, parse
from tests.paths import ROOT

# The complete file of LANGUAGE.md, aligned the way people write it by hand.
LANGUAGE_EXAMPLE = '''\
# Chat service on one B200: long shared system prompt, 32 concurrent users.
kvplan 1                                   # language version (optional, first line)

deployment "chat-70b" {
    model     = llama-3-70b                # catalog id (kvplan models lists them)
    weights   = bf16                       # weight storage dtype
    device    = b200                       # catalog id (kvplan devices lists them)
    devices   = auto                       # a number, `auto`, or `<= 8`
    placement = auto                       # auto | striped | pinned | affinity
    engine    = vllm                       # any | vllm | sglang | trtllm

    workload {
        batch   = 32                       # concurrent sequences
        context = 128k                     # tokens per sequence
        prefix  = 96k                      # tokens of prefix shared ...
        fanout  = 8                        # ... by this many requests
        reuse   = 60%                      # contexts that come back in a later session
    }

    quality {
        budget        = near-lossless      # lossless | near-lossless | moderate | aggressive
        eviction      = allowed            # allowed | forbidden (default forbidden)
        min_retention = 0.5
    }

    slo {
        step_time  <= 50 ms                # decode step (time per output token)
        throughput >= 500 tok/s            # aggregate decode tokens per second
    }

    objective = fewest-devices             # fewest-devices | fastest | most-headroom

    pin {                                  # choices already made; lint checks them
        kv_dtype       = fp8
        block_size     = 16
        prefix_caching = on
    }

    expect {                               # assertions, checked by `kvplan lint`
        regime == kv-bound
        fits
        speedup >= 1.5
    }
}

model "my-7b" {                            # a model beside the catalog
    config = "models/my-7b/config.json"    # Hugging Face config.json, relative to this file
    params = 7.2B                          # optional when the config lets kvplan count them
}

device "my-gpu" {                          # a device beside the catalog
    memory     = 141 GB
    bandwidth  = 4.8 TB/s
    compute    = 989 TFLOPS                # dense BF16
    partitions = 1                         # dies or HBM stacks pages can be pinned to
    link       = 900 GB/s                  # scale-up link to peer devices
    host_link  = 64 GB/s                   # to host memory
}
'''

MESSY = '''\
# header

kvplan 1
deployment "w" {   # the deployment

  model=llama-3-8b
\tdevice =   h100
  devices = <=8


    # about the workload
    workload { batch = [1 ,8,32]  # sizes
        context = 128 k
        reuse = 60 %
        sizes = [1,  # one
           8]  # eight
    }
    slo { step_time<=50ms }
    expect { fits }
    pin {}

    # closing thoughts
}
device "g" {
    memory = 141GB
    compute = 989TFLOPS }
# the end'''

MESSY_FORMATTED = '''\
# header

kvplan 1

deployment "w" {  # the deployment
    model   = llama-3-8b
    device  = h100
    devices = <= 8

    # about the workload
    workload {
        batch   = [1, 8, 32]  # sizes
        context = 128 k
        reuse   = 60 %
        sizes = [
            1,  # one
            8,
        ]  # eight
    }
    slo {
        step_time <= 50ms
    }
    expect {
        fits
    }
    pin {
    }

    # closing thoughts
}

device "g" {
    memory  = 141GB
    compute = 989TFLOPS
}
# the end
'''


def corpus() -> list[tuple[str, str]]:
    """(name, text) of every valid file we have: the examples, the valid fixtures, the two above."""
    files = sorted(ROOT.glob("examples/**/*.kvp")) + sorted(ROOT.glob("tests/data/valid/**/*.kvp"))
    out = [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in files]
    return out + [("LANGUAGE.md", LANGUAGE_EXAMPLE), ("messy", MESSY)]


CORPUS = corpus()


def comment_texts(text: str) -> collections.Counter[str]:
    return collections.Counter(c.text.strip() for c in parse(text, "x.kvp").comments)


def meaning(text: str, path: str) -> Any:
    """What a check makes of the text, minus where things were written."""
    result = check_source(text, path)
    strip = lambda a, v: a.name not in ("span", "spans")  # noqa: E731
    return ([attrs.asdict(s, filter=strip) for s in result.scenarios],
            sorted((d.code, d.message) for d in result.diagnostics))


def test_messy_file_takes_the_canonical_layout() -> None:
    assert format_source(MESSY, "m.kvp") == MESSY_FORMATTED


def test_language_example_changes_only_whitespace() -> None:
    out = format_source(LANGUAGE_EXAMPLE, "l.kvp")
    squeeze = lambda s: [re.sub(r"\s+", " ", ln.strip()) for ln in s.splitlines()]  # noqa: E731
    assert squeeze(out) == squeeze(LANGUAGE_EXAMPLE)
    # settings of a block align on `=`; their trailing comments line up two spaces past the longest
    assert "    model     = llama-3-70b  # catalog id (kvplan models lists them)\n" in out
    assert "    placement = auto         # auto | striped | pinned | affinity\n" in out


@pytest.mark.parametrize("name, text", CORPUS, ids=[n for n, _ in CORPUS])
def test_corpus_keeps_comments_meaning_and_is_a_fixed_point(name: str, text: str) -> None:
    once = format_source(text, name)
    assert comment_texts(once) == comment_texts(text)
    assert format_source(once, name) == once
    assert meaning(once, name) == meaning(text, name)


@st.composite
def relaid(draw: st.DrawFn) -> tuple[str, str]:
    """A corpus file with its layout disturbed: indentation, spaces around `=`, trailing blanks."""
    name, text = draw(st.sampled_from(CORPUS))
    lines = text.split("\n")
    out = []
    for ln in lines:
        body = ln.strip()
        indent = draw(st.sampled_from(["", " ", "  ", "\t", "        ", " \t "]))
        if '"' not in body and "#" not in body and draw(st.booleans()):
            body = re.sub(r"\s*(<=|>=|==|=)\s*", draw(st.sampled_from([r"\1", r" \1 ", r"  \1   "])), body)
        out.append(indent + body + draw(st.sampled_from(["", " ", "\t"])) if body else "")
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    return name, newline.join(out)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(relaid())
def test_layout_does_not_matter(case: tuple[str, str]) -> None:
    name, text = case
    original = dict(CORPUS)[name]
    once = format_source(text, name)
    assert once == format_source(original, name)
    assert comment_texts(once) == comment_texts(text)


@st.composite
def with_blank_lines(draw: st.DrawFn) -> tuple[str, str]:
    name, text = draw(st.sampled_from(CORPUS))
    lines = text.split("\n")
    out = []
    for ln in lines:
        out.append(ln)
        out += [""] * draw(st.integers(0, 2))
    return name, "\n".join(out)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(with_blank_lines())
def test_blank_lines_are_collapsed_and_formatting_is_idempotent(case: tuple[str, str]) -> None:
    name, text = case
    once = format_source(text, name)
    assert "\n\n\n" not in once and not once.startswith("\n")
    assert once.endswith("\n") and not once.endswith("\n\n")
    assert not re.search(r"\{\n\n|\n\n\s*\}", once)        # never right inside a block
    assert format_source(once, name) == once
    assert comment_texts(once) == comment_texts(text)


def test_syntax_error_raises_with_a_span() -> None:
    with pytest.raises(KvpSyntaxError) as info:
        format_source('deployment "x" {\n    batch 32\n}\n', "bad.kvp")
    assert info.value.span is not None and info.value.span.line == 2


def nested(depth: int, flags: int = 1) -> str:
    """A deployment whose blocks nest `depth` deep (its own braces included), `flags` bare keys at the bottom."""
    return ('deployment "x" {\n' + "a {\n" * (depth - 1) + "f\n" * flags + "}\n" * depth)


def test_blocks_nest_at_most_the_limit_and_the_next_level_is_refused_where_it_opens() -> None:
    at_cap = format_source(nested(limits.MAX_NESTING), "deep.kvp")
    assert at_cap.splitlines()[limits.MAX_NESTING] == INDENT * limits.MAX_NESTING + "f"
    with pytest.raises(KvpSyntaxError) as info:
        format_source(nested(limits.MAX_NESTING + 1) + "\n" + nested(40), "deep.kvp")
    err = info.value
    # line 1 opens level 1; the block on line MAX_NESTING + 1 opens level MAX_NESTING + 1
    assert err.code == "KV003" and err.span is not None
    assert (err.span.line, err.span.column) == (limits.MAX_NESTING + 1, 1)
    assert f"at most {limits.MAX_NESTING} deep" in err.message


@pytest.mark.slow
def test_formatted_text_stays_linear_in_the_input_at_the_nesting_limit() -> None:
    # The layout indents four spaces a level: under the cap an output line is at most 4 × MAX_NESTING
    # characters longer than its source line, and every source line here is two characters.
    text = nested(limits.MAX_NESTING, flags=20_000)
    out = format_source(text, "deep.kvp")
    assert len(out) <= len(text) * (1 + 2 * limits.MAX_NESTING)
    # past the cap nothing is laid out: a file nested 5,000 deep is refused, not printed
    with pytest.raises(KvpSyntaxError):
        format_source(nested(5_000), "deep.kvp")

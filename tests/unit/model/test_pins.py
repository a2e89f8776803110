"""Scenario pins, typed (kvplan.model.scenario.Pins): each pin as its settings row takes it."""

from __future__ import annotations

from kvplan.base.errors import Span
from kvplan.catalog import settings
from kvplan.model.scenario import Pin, Pins

AT = Span("d.kvp", 1, 1, 1, 2)


def pins(**values: object) -> Pins:
    return Pins({k: Pin(k, v, AT) for k, v in values.items()})  # type: ignore[arg-type]  # the checker's floats


def test_counts_are_ints_fractions_floats_switches_bools_and_words_strs() -> None:
    p = pins(devices=8.0, block_size=16.0, retention=0.75, memory_fraction=0.9, prefix_caching=False,
             kv_dtype="fp8", tier="host", max_batched_tokens=8192.0)
    assert (p.devices, p.block_size, p.max_batched_tokens) == (8, 16, 8192)
    assert all(type(n) is int for n in (p.devices, p.block_size, p.max_batched_tokens))
    assert (p.retention, p.memory_fraction) == (0.75, 0.9)
    assert p.prefix_caching is False and p.kv_dtype == "fp8" and p.tier == "host"
    assert p.value(settings.pin("block_size")) == 16 and type(p.value(settings.pin("block_size"))) is int


def test_unpinned_is_none_and_replicas_default_to_one() -> None:
    p = pins()
    assert p.kv_dtype is None and p.devices is None and p.memory_fraction is None
    assert (p.replicas, p.attention_dp) == (1, 1)
    assert p.at_default(settings.pin("replicas"))


def test_text_is_what_a_flag_or_a_kvp_writes() -> None:
    p = pins(replicas=2.0, memory_fraction=0.9, prefix_caching=True, kv_dtype="bf16")
    assert [p.text(settings.pin(k)) for k in ("replicas", "memory_fraction", "prefix_caching", "kv_dtype")] == [
        "2", "0.9", "on", "bf16"]
    assert not p.at_default(settings.pin("replicas"))
    assert pins(replicas=1.0).at_default(settings.pin("replicas"))

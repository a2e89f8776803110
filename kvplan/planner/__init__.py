"""The planner: a scenario in, a justified plan out (SPEC §8 applied to the regime map).

    plan(scenario) -> Plan

Steps: R1 map the regime of the uncompressed deployment; build the candidate
space from the quality budget, the engine and the pins; evaluate every
candidate (search.evaluate); drop what breaks a rule (R3–R7) or does not fit;
choose by the objective; decide tiering from the reuse economics; re-evaluate
the map for the chosen plan (R8); record every decision with its numbers,
evidence and the options turned down.

This module is the package's face: the names the rest of kvplan uses. The work is in
`entry` (plan() and the plans of a file), `batch` (the steps of one batch plan), `space`
(what a plan starts from and the candidate space), `figures` (the maps, metrics, tier and
assumptions of the chosen candidate), `unmet` (what it misses), `suggest` (the changes that
would meet it, each verified by planning) and `serving` (a request workload's service loop).
"""

from kvplan.planner.batch import Candidates, candidates
from kvplan.planner.entry import Overrides, for_engine, plan, plans_for, scenarios_for, with_engines
from kvplan.planner.space import (
    DEFAULT_MIN_GAIN,
    DEFAULT_RESERVE,
    admissible_dtypes,
    eviction_admissible,
    factors_for,
    slos,
)
from kvplan.planner.suggest import REPLANS_PER_FILE, SUGGESTED_COUNTS, SUGGESTION_MAX_DEVICES, Replans, unsearched

__all__ = ["DEFAULT_MIN_GAIN", "DEFAULT_RESERVE", "REPLANS_PER_FILE", "SUGGESTED_COUNTS", "SUGGESTION_MAX_DEVICES",
           "Candidates", "Overrides", "Replans", "admissible_dtypes", "candidates", "eviction_admissible",
           "factors_for", "for_engine", "plan", "plans_for", "scenarios_for", "slos", "unsearched", "with_engines"]

"""Diagnostic codes the planner owns: KV2xx (a pinned choice breaks a design rule, one
code per rule of SPEC §8) and KV3xx (failed expectations and unmeetable constraints)."""

from __future__ import annotations

from kvplan.diagnostics import Severity, register

KV201 = register("KV201", "regime-not-asserted",
                 "R1: the spec does not assert its regime, so a change that moves it goes unnoticed",
                 Severity.INFO)
KV202 = register("KV202", "lossless-domain-disabled",
                 "R2: a pin turns off a lossless domain (paging or prefix caching)", Severity.WARNING)
KV203 = register("KV203", "compressed-below-s-star",
                 "R3: KV compressed in the weight-bound regime, where it barely helps", Severity.WARNING)
KV204 = register("KV204", "evicts-before-quantizing",
                 "R4: tokens evicted while the KV is still 16-bit; quantize first", Severity.WARNING)
KV205 = register("KV205", "eviction-not-tolerated",
                 "R5: eviction where the workload forbids it, or retention below 0.5", Severity.ERROR)
KV206 = register("KV206", "remote-tier-in-step",
                 "R6: KV that does not fit in device memory would be read from a remote tier inside a step",
                 Severity.ERROR)
KV207 = register("KV207", "pinned-pages-multi-die",
                 "R7: pages pinned to one partition of a multi-die device", Severity.ERROR)
KV208 = register("KV208", "compression-past-regime",
                 "R8: after the pinned quantization the point is weight-bound, yet eviction is pinned too",
                 Severity.WARNING)

KV301 = register("KV301", "does-not-fit", "the deployment does not fit on any allowed device count")
KV302 = register("KV302", "step-time-slo-unmet", "no admissible plan meets the step-time SLO")
KV303 = register("KV303", "throughput-slo-unmet", "no admissible plan meets the throughput SLO")
KV304 = register("KV304", "expectation-failed", "an `expect` assertion is false for the plan")
KV305 = register("KV305", "pin-unsupported", "a pinned choice the engine or the quality budget does not admit")

RULE_CODES = {"R1": "KV201", "R2": "KV202", "R3": "KV203", "R4": "KV204", "R5": "KV205", "R6": "KV206",
              "R7": "KV207", "R8": "KV208"}

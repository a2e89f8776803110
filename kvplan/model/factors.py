"""The factors of the expected step and TTFT (docs/expected.md) as one record, apart from the model that uses them
(kvplan.model.expected, which loads numpy), so that a calibration profile's reader (kvplan.model.profile) lays its
fits over them without it."""

from __future__ import annotations

from typing import Mapping, Optional

import attrs

from kvplan.base.evidence import Evidence, Value
from kvplan.base.records import record


@record
class Factors:
    """The factors of the expected step and TTFT, each a named Value with its evidence class. Fractions are
    unit "x" in (0, 1]; times are seconds. `profile` names the calibration profile they were fitted in, ""
    for kvplan's defaults."""

    eta_w: Value               # fraction of β_eff the weight stream achieves
    eta_kv: Value              # fraction of β_eff the KV stream achieves, for this KV dtype and its kernel
    eta_compute: Value         # fraction of dense peak π achievable (prefill; the decode compute floor)
    t_fixed: Value             # s per step (and per prefill): launches, sampling, scheduling
    collective_latency: Value  # s per tensor-parallel all-reduce, beyond its bytes over the link
    t_layer: Value             # s per layer per forward pass: the layer's small kernels' fixed time
    t_moe: Value               # s per MoE layer per forward pass: routing and permutation (MoE models only)
    #: the small-batch GEMM efficiency: where set, the weight GEMMs' FLOPs at η_gemm · π add to the memory stream
    #: (kernels that serialise them); None, kvplan's default everywhere: they overlap it (docs/expected.md)
    eta_gemm: Optional[Value] = None
    profile: str = ""

    def items(self) -> tuple[tuple[str, Value], ...]:
        """(name, Value) in a fixed order: what renderers print and JSON carries (eta_gemm only where set)."""
        gemm = (("eta_gemm", self.eta_gemm),) if self.eta_gemm is not None else ()
        return (("eta_w", self.eta_w), ("eta_kv", self.eta_kv), ("eta_compute", self.eta_compute),
                ("t_fixed", self.t_fixed), ("collective_latency", self.collective_latency), ("t_layer", self.t_layer),
                ("t_moe", self.t_moe), *gemm)

    def replaced(self, new: Mapping[str, Value], profile: Optional[str] = None) -> Factors:
        """These factors with those named in `new` replaced (and `profile`, when given)."""
        d = {**dict(self.items()), **new}
        return Factors(d["eta_w"], d["eta_kv"], d["eta_compute"], d["t_fixed"], d["collective_latency"],
                       d["t_layer"], d["t_moe"], d.get("eta_gemm"),
                       profile=self.profile if profile is None else profile)

    def perfect(self) -> Factors:
        """Every fraction 1, every time 0 and the GEMMs overlapped (no eta_gemm): the factors that give the bound
        back."""
        perfect = self.replaced({k: Value(1.0 if v.unit == "x" else 0.0, v.unit, Evidence.ASSUMED, "perfect: the bound")
                                 for k, v in self.items() if k != "eta_gemm"}, "")
        return attrs.evolve(perfect, eta_gemm=None)


__all__ = ["Factors"]

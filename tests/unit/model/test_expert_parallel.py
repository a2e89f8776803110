"""SPEC §14: the expert-parallel all-to-all and attention data parallelism in the expected collectives
(kvplan.model.expected.collective_time), each recomputed here from the formula."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan import catalog
from kvplan.model import expected as ex

DSV3 = catalog.get_model("deepseek-v3")
H200 = catalog.get_device("h200")
NVLINK = ex.link_bandwidth(H200)
LAT = 5e-6


def test_all_to_all_moves_2_b_local_k_d_w_times_e_minus_1_over_e_per_rank_per_layer() -> None:
    assert NVLINK is not None
    b, e, k, d = 512.0, 8, DSV3.experts_per_token, ex.residual_width(DSV3)
    per_layer = 2 * LAT + 2 * (b / e) * k * d * 2.0 * (e - 1) / e / NVLINK
    got = ex.all_to_all_time(DSV3, b, e, NVLINK, LAT)
    assert float(got) == pytest.approx(DSV3.n_layers * per_layer, rel=1e-12)
    assert float(ex.all_to_all_time(DSV3, b, 1, NVLINK, LAT)) == 0.0      # one rank: nothing to dispatch


def test_without_attention_dp_or_ep_the_collectives_are_the_two_all_reduces_a_layer() -> None:
    b = np.array([1.0, 64.0, 4096.0])
    for tp, n in ((8, 8), (16, 16), (4, 8)):
        both = ex.all_reduce_time(DSV3, b, tp, ex.group_bandwidth(H200, tp, n, NVLINK), LAT)
        np.testing.assert_array_equal(ex.collective_time(DSV3, H200, b, tp, n, NVLINK, LAT), both)


def test_attention_dp_over_the_whole_group_drops_the_attention_all_reduce() -> None:
    b, tp = 256.0, 8
    full = float(ex.collective_time(DSV3, H200, b, tp, tp, NVLINK, LAT))
    adp = float(ex.collective_time(DSV3, H200, b, tp, tp, NVLINK, LAT, attention_dp=tp))
    # attention groups of one rank have nothing to all-reduce: the MLP's all-reduce over the 8 ranks is left
    assert adp == pytest.approx(full / 2, rel=1e-12)


def test_on_one_node_ep_equals_tp_bytes_when_k_equals_e_and_wins_across_nodes() -> None:
    """k = 8 experts a token over e = 8 ranks: the all-to-all moves 2·(b/8)·8·d·w·7/8 = the all-reduce's
    2·7/8·b·d·w, and pays a latency each way; over 16 ranks on two nodes it moves half the all-reduce's bytes
    over the scale-out link, which decides both."""
    b = 1024.0
    one_node_tp = float(ex.collective_time(DSV3, H200, b, 8, 8, NVLINK, 0.0, attention_dp=8))
    one_node_ep = float(ex.collective_time(DSV3, H200, b, 8, 8, NVLINK, 0.0, attention_dp=8, ep=8))
    assert one_node_ep == pytest.approx(one_node_tp, rel=1e-12)
    two_nodes_tp = float(ex.collective_time(DSV3, H200, b, 16, 16, NVLINK, 0.0, attention_dp=16))
    two_nodes_ep = float(ex.collective_time(DSV3, H200, b, 16, 16, NVLINK, 0.0, attention_dp=16, ep=16))
    assert two_nodes_ep == pytest.approx(two_nodes_tp * 8 / 16, rel=1e-12)

"""`kvplan map`: the regime map at one point, and its pictures when asked."""

from __future__ import annotations

import attrs

from kvplan.app.output import EXIT_CLEAN, Said, out
from kvplan.app.requests import MapRequest
from kvplan.app.spec import load_calibration


def regime_map(req: MapRequest) -> Said:
    """κ, s*, s_cap, β_eff, intensity, step time and regime by KV dtype; the plots are written first."""
    from kvplan import catalog
    from kvplan.catalog import weight_bytes
    from kvplan.catalog.hub import resolve_model
    from kvplan.model import roofline as rf
    from kvplan.model.regime import regime_map

    device = catalog.get_device(req.device_id)
    b, s = req.batch, req.context
    rf.check_batch_context(b, s)
    model, w = weight_bytes.planned(resolve_model(req.model_id, req.model_config),
                                    catalog.dtype(req.weights) if req.weights is not None else None)
    kv = catalog.dtype(req.kv_dtype)
    cfg = rf.Config(model, device, n_devices=req.n_devices, tp=req.tp, w_p=w.width, w_kv=kv.width,
                    placement=req.placement)
    from kvplan.catalog.engines import get_engine
    from kvplan.model.profile import missing_fit

    get_engine(req.engine)  # an unknown engine is a catalog error, one line
    profile = load_calibration(req.calibration)
    rm = regime_map(cfg, b, s, weights=w, kv=kv, engine=req.engine, profile=profile)
    gap = missing_fit(profile, device.id, req.engine)
    if gap:
        rm = attrs.evolve(rm, notes=(*rm.notes, gap))
    if req.plot_path or req.roofline_path:
        from kvplan.model.regime import DEFAULT_KV_DTYPES
        from kvplan.render import plot

        if req.plot_path:
            plot.regime_map_figure(cfg, b, s, list(dict.fromkeys([kv.id, *DEFAULT_KV_DTYPES])), req.plot_path,
                                   kv_name=kv.id)
        if req.roofline_path:
            plot.roofline_figure(cfg, b, s, req.roofline_path)
    from kvplan.render import map_view

    yield out(map_view.text(rm) if req.fmt == "text" else map_view.json_text(rm), nl=False)
    return EXIT_CLEAN

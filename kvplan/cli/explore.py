"""The commands that look at a model on a device: the catalogs, the paper's tables, `map` and `sweep`."""

from __future__ import annotations

import contextlib
import re
import sys
from typing import IO, Iterator

import click

from kvplan.app import requests as rq
from kvplan.base import limits
from kvplan.cli.options import (
    FILE,
    allow_path_option,
    calibration_option,
    count_type,
    tokens_type,
    warn_upper_k,
)
from kvplan.cli.run import handles_errors, show, shown


@click.command("models")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@handles_errors
def models_cmd(fmt: str) -> None:
    """List the model catalog."""
    from kvplan.app import listing

    shown(listing.models(rq.Listing(fmt)))



@click.command("devices")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@handles_errors
def devices_cmd(fmt: str) -> None:
    """List the device catalog."""
    from kvplan.app import listing

    shown(listing.devices(rq.Listing(fmt)))



@click.command("tables")
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]), default="text", show_default=True)
@handles_errors
def tables_cmd(fmt: str) -> None:
    """Regenerate the derived parts of the paper's Tables 1, 3, 4, 5, 7 and the W4 economics."""
    from kvplan.app import listing

    shown(listing.tables(rq.Listing(fmt)))



@click.command("map")
@click.option("--model", "model_id", metavar="ID",
              help="Catalog model id (kvplan models), or a Hugging Face repo id (docs/hub.md).")
@click.option("--model-config", type=FILE, metavar="PATH",
              help="A Hugging Face config.json instead of a catalog id.")
@click.option("--device", "device_id", required=True, metavar="ID", help="Catalog device id (kvplan devices).")
@click.option("--devices", "n_devices", type=count_type(hi=limits.MAX_DEVICES), default=1, show_default=True,
              metavar="N",
              help="Devices holding the model.")
@click.option("--tp", type=count_type(0, limits.MAX_DEVICES), default=0, metavar="N",
              help="Tensor-parallel size (default 0: all devices).")
@click.option("--batch", type=count_type(hi=limits.MAX_BATCH), default=1, show_default=True, metavar="N",
              help="Concurrent sequences.")
@click.option("--context", type=tokens_type(limits.MAX_TOKENS), default="128k", show_default=True, metavar="TOKENS",
              help="Tokens per sequence (128k = 128,000; 128Ki = 131,072).")
@click.option("--weights", default=None,
              help="Weight dtype: parameters × its width  [default: the checkpoint's own bytes where the model "
                   "has them (docs/weights.md), else bf16]")
@click.option("--kv-dtype", default="bf16", show_default=True, help="KV cache dtype.")
@click.option("--placement", type=click.Choice(["striped", "pinned", "affinity"]), default="striped",
              show_default=True, help="KV page placement on multi-partition devices.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--plot", "plot_path", type=FILE, metavar="FILE.png|svg",
              help="Also draw the regime map (context against batch) to this file "
                   "(needs matplotlib: pip install matplotlib).")
@click.option("--roofline", "roofline_path", type=FILE, metavar="FILE.png|svg",
              help="Also draw the roofline with this point to this file (needs matplotlib: pip install matplotlib).")
@click.option("--engine", default="any", show_default=True, metavar="NAME",
              help="The engine of the expected figures' per-step overhead and calibration fit: vllm, sglang, trtllm "
                   "or any.")
@calibration_option
@handles_errors
def map_cmd(model_id: str | None, model_config: str | None, device_id: str, n_devices: int, tp: int,
            batch: int, context: int, weights: str | None, kv_dtype: str, placement: str, fmt: str,
            plot_path: str | None, roofline_path: str | None, engine: str, calibration: str | None) -> None:
    """The regime map at one point: κ, s*, s_cap, β_eff, intensity, step time, regime, by KV dtype."""
    from kvplan.app.regime import regime_map

    shown(regime_map(rq.MapRequest(model_id, model_config, device_id, n_devices, tp, batch, context, weights,
                                   kv_dtype, placement, fmt, plot_path, roofline_path, engine, calibration)))



@contextlib.contextmanager
def _sweep_output(output: str) -> Iterator[IO[bytes]]:
    """The sweep's output, binary in every format: stdout's buffer, or a file that replaces `output` once the
    sweep is complete (kvplan.base.outputs: no link or device written through)."""
    if output == "-":
        sys.stdout.flush()
        yield sys.stdout.buffer
        return
    from kvplan.base.outputs import replaced_file

    with replaced_file(output) as fh:
        yield fh


@click.command("sweep")
@click.argument("spec_file", required=False, type=FILE, metavar="[FILE.kvp]")
@click.option("--model", "model_id", metavar="ID",
              help="Catalog model id or Hugging Face repo id (without FILE).")
@click.option("--model-config", type=FILE, metavar="PATH",
              help="A Hugging Face config.json instead of a catalog id.")
@click.option("--device", "device_id", metavar="ID", help="Catalog device id (without FILE).")
@click.option("--devices", "devices", metavar="LIST", help="Device counts: 1,2,4,8 or 1..8  [default: 1]")
@click.option("--kv-dtype", "kv_dtypes", metavar="LIST", help="KV dtypes: bf16,fp8,int4,int2  [default: bf16]")
@click.option("--batch", metavar="LIST", help="Batch sizes: 1,8,32 or 1..64 or 1..1024:x2  [default: 1]")
@click.option("--context", metavar="LIST",
              help="Contexts: 32k,128k or 4k..1M:x2 or 8k..128k:+8k  [default: 128k]")
@click.option("--weights", default=None,
              help="Weight dtype  [default: the checkpoint's own bytes where known (docs/weights.md), else bf16]")
@click.option("--placement", type=click.Choice(["striped", "pinned", "affinity"]), default=None,
              help="KV page placement  [default: striped]")
@click.option("--format", "fmt", type=click.Choice(["csv", "json", "parquet"]), default="csv", show_default=True,
              help="parquet needs the `parquet` extra (pyarrow)")
@click.option("-o", "--output", type=FILE, default="-", metavar="FILE",
              help="Write here instead of stdout.")
@click.option("--exact", is_flag=True,
              help="CSV: write every number as its shortest round-trip repr, not to 6 significant digits (slower).")
@click.option("--jobs", type=count_type(hi=64), default=1, show_default=True, metavar="N",
              help="CSV: processes that make the rows of a large sweep (helps only where cores are free)")
@allow_path_option
@calibration_option
@handles_errors
def sweep_cmd(spec_file: str | None, model_id: str | None, model_config: str | None, device_id: str | None,
              devices: str | None, kv_dtypes: str | None, batch: str | None, context: str | None,
              weights: str | None, placement: str | None, fmt: str, output: str, exact: bool,
              jobs: int, allow_paths: tuple[str, ...], calibration: str | None) -> None:
    """Evaluate every point of devices × KV dtype × batch × context; stream CSV or JSON rows.

    Without FILE, --model (or --model-config) and --device name the deployment; with a .kvp
    FILE each of its deployments is swept, the lists defaulting to the file's values.
    """
    from kvplan.app.sweep import sweep

    for number in re.findall(r"(?<!\w)(?<!\d\.)(\d+(?:\.\d+)?)\s*K(?![A-Za-z])", context or ""):
        warn_upper_k("--context", number)
    job = show(sweep(rq.SweepRequest(spec_file, model_id, model_config, device_id, devices, kv_dtypes, batch,
                                     context, weights, placement, fmt, exact, int(jobs), allow_paths,
                                     calibration)))
    try:
        with _sweep_output(output) as out:
            steps = job.write(out)
            if job.total > 100_000 and sys.stderr.isatty():
                with click.progressbar(length=job.total, label="sweep", file=sys.stderr) as bar:
                    for n in steps:
                        bar.update(n)
            else:
                for _ in steps:
                    pass
            out.flush()
    except BrokenPipeError:  # the reader stopped early (| head): not an error of ours
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())

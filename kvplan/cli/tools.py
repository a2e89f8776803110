"""The commands that read what engines ran: `import` and `calibrate`; and `completion`."""

from __future__ import annotations

import click

from kvplan.app import requests as rq
from kvplan.base import limits
from kvplan.base.errors import KvplanError
from kvplan.cli.options import FILE, Readers, count_type, tokens_type
from kvplan.cli.run import handles_errors, shown


@click.command("import")
@click.argument("source", metavar="ARGS-OR-FILE")
@click.option("--from", "engine", type=Readers(), required=True,
              help="The engine whose command line (vllm, sglang) or YAML/command line (trtllm) this is.")
@click.option("--model", "model_id", metavar="ID",
              help="Catalog model id or Hugging Face repo id, when the engine's model is not in the catalog.")
@click.option("--model-config", type=FILE, metavar="PATH",
              help="A Hugging Face config.json for a model beside the catalog.")
@click.option("--device", "device_id", metavar="ID", help="Catalog device id (engine flags do not name it).")
@click.option("--batch", type=count_type(hi=limits.MAX_BATCH), default=None, metavar="N",
              help="Concurrent sequences served (default: the engine's batch limit, else what the KV pool holds).")
@click.option("--context", type=tokens_type(limits.MAX_TOKENS), default=None, metavar="TOKENS",
              help="The typical tokens per sequence, at most the engine's limit, which becomes max_context "
                   "(default: what the KV pool holds for the batch; 32k = 32,000; 32Ki = 32,768).")
@click.option("-o", "--output", type=FILE, default="-", metavar="FILE.kvp",
              help="Write the spec here instead of stdout.")
@handles_errors
def import_cmd(source: str, engine: str, model_id: str | None, model_config: str | None, device_id: str | None,
               batch: int | None, context: int | None, output: str) -> None:
    """Write the .kvp equivalent of an existing deployment: its KV choices become pins.

    ARGS-OR-FILE is the engine's command line as one quoted argument (`vllm serve MODEL --flag ...`),
    or a file holding it; for trtllm, the --config YAML or a `trtllm-serve MODEL --config x.yaml` line.
    Flags that were removed or that kvplan does not know are warnings on stderr and comments in the spec.
    """
    from kvplan.app.imports import import_spec

    shown(import_spec(rq.ImportRequest(source, engine, model_id, model_config, device_id, batch, context, output)))



@click.command("calibrate")
@click.argument("paths", nargs=-1, required=True, type=FILE, metavar="FILE...")
@click.option("-o", "--output", type=FILE, required=True, metavar="PROFILE.toml",
              help="Write the calibration profile here.")
@click.option("--model", "model_id", metavar="ID", help="The model the runs served, where a file does not say it.")
@click.option("--device", "device_id", metavar="ID", help="Catalog device id of the runs (kvplan devices).")
@click.option("--devices", "n_devices", type=count_type(hi=limits.MAX_DEVICES), default=None, metavar="N",
              help="Devices of the deployment  [default: the tensor-parallel size, else 1, assumed].")
@click.option("--tensor-parallel", "tp", type=count_type(hi=limits.MAX_DEVICES), default=None, metavar="N",
              help="Tensor-parallel size  [default: the devices, else 1, assumed].")
@click.option("--weights", default=None, help="Weight dtype  [default: the checkpoint's own bytes].")
@click.option("--kv-dtype", default=None, help="KV cache dtype  [default: bf16, assumed].")
@click.option("--engine", default=None, metavar="ENGINE",
              help="vllm, sglang, trtllm or any  [default: the benchmark's engine; a CSV without one: any].")
@click.option("--batch", type=count_type(hi=limits.MAX_BATCH), default=None, metavar="N",
              help="Batch of the runs (vllm bench latency's --batch-size, a serve run's concurrency).")
@click.option("--input-len", type=tokens_type(limits.MAX_TOKENS), default=None, metavar="TOKENS",
              help="Prompt tokens of each request (vllm bench latency's --input-len).")
@click.option("--output-len", type=tokens_type(limits.MAX_TOKENS), default=None, metavar="TOKENS",
              help="Generated tokens of each request (vllm bench latency's --output-len).")
@handles_errors
def calibrate_cmd(paths: tuple[str, ...], output: str, model_id: str | None, device_id: str | None,
                  n_devices: int | None, tp: int | None, weights: str | None, kv_dtype: str | None,
                  engine: str | None, batch: int | None, input_len: int | None, output_len: int | None) -> None:
    """Fit the expected model's factors to your own measurements; write a calibration profile.

    FILE is a `vllm bench latency --output-json` or `vllm bench serve --save-result` JSON, SGLang's
    bench_one_batch or bench_serving JSON lines, or the CSV of docs/calibrate.md. The options say what a file
    does not. Exit 0 when the profile is written, 2 when nothing could be fitted.
    """
    from kvplan.app.calibrate import calibrate

    shown(calibrate(rq.CalibrateRequest(paths, output, model_id, device_id, n_devices, tp, weights, kv_dtype, engine,
                                        batch, input_len, output_len)))



@click.command("completion")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]), metavar="SHELL")
@handles_errors
def completion_cmd(shell: str) -> None:
    """Print the shell completion script for bash, zsh or fish.

    The same text as `_KVPLAN_COMPLETE=SHELL_source kvplan`. Load it at shell start:

    \b
    bash:  eval "$(kvplan completion bash)"      (in ~/.bashrc)
    zsh:   eval "$(kvplan completion zsh)"       (in ~/.zshrc)
    fish:  kvplan completion fish > ~/.config/fish/completions/kvplan.fish
    """
    from click.shell_completion import get_completion_class

    cls = get_completion_class(shell)
    if cls is None:  # click.Choice admits only the shells click knows
        raise KvplanError(f"no completion for {shell}", help="choose bash, zsh or fish")
    root = click.get_current_context().find_root().command  # the `kvplan` group
    # click's template ends in a newline in some releases and not in others: print exactly one.
    click.echo(cls(root, {}, "kvplan", "_KVPLAN_COMPLETE").source().rstrip("\n"))

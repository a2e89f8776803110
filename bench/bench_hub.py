"""`kvplan lint` of a spec naming five Hugging Face repo ids the cache lacks, with no network at all (issue 19).

Run from the repository root (kvplan installed, e.g. `pip install -e .`):

    python bench/bench_hub.py

"No network" is the hub's endpoint set to a closed loopback port (HF_ENDPOINT=http://127.0.0.1:9) and an
empty cache (HF_HUB_CACHE in a temporary directory); nothing outside this machine is contacted. Three runs:
HF_HUB_OFFLINE=1; without it (lint reads only the cache); and `--online` without it (one refused attempt,
then none). Each is one fresh process, timed from spawn to exit (wall seconds), and must give five KV111
findings. Target: under 2 s each.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KVPLAN = [shutil.which("kvplan")] if shutil.which("kvplan") else [sys.executable, "-m", "kvplan"]


def spec() -> str:
    return "kvplan 1\n" + "".join(
        f'deployment "d{i}" {{\n    model  = "nobody/no-such-model-{i}"\n    device = h100\n'
        "    workload {\n        batch   = 1\n        context = 1k\n    }\n}\n" for i in range(1, 6))


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "five.kvp"
        path.write_text(spec(), encoding="utf-8")
        base = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
        base.update(HF_ENDPOINT="http://127.0.0.1:9", HF_HUB_CACHE=str(Path(tmp) / "hub"))
        print(f"{'run':<34} {'wall s':>7} {'KV111':>6}  target")
        for label, env, extra in (("HF_HUB_OFFLINE=1", {**base, "HF_HUB_OFFLINE": "1"}, []),
                                  ("no HF_HUB_OFFLINE (cache only)", base, []),
                                  ("no HF_HUB_OFFLINE, --online", base, ["--online"])):
            cmd = [*KVPLAN, "lint", "--output-format", "json", *extra, str(path)]
            t0 = time.perf_counter()
            r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
            wall = time.perf_counter() - t0
            found = [d for d in json.loads(r.stdout)["diagnostics"] if d["code"] == "KV111"] if r.stdout else []
            print(f"{label:<34} {wall:>7.2f} {len(found):>6}  < 2 s")
        print(f"command: HF_ENDPOINT=http://127.0.0.1:9 HF_HUB_CACHE=TMP/hub "
              f"{shlex.join(cmd).replace(tmp, 'TMP')}")
        print(f"cores: {os.cpu_count()}  python: {sys.version.split()[0]}")


if __name__ == "__main__":
    main()

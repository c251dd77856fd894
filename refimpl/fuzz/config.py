"""A fuzz campaign's settings (`python -m refimpl.fuzz`'s options; docs/fuzzing.md gives each one's meaning)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from refimpl.fuzz.reduce import MAX_CANDIDATES


@dataclass
class Config:
  seed: int = 0
  iterations: int | None = None
  time: float | None = None
  backends: list[str] | None = None      # names or "module:Class"; None: every device that opens, but PYTHON
  jobs: int = 2
  out: Path = Path("fuzz-findings")
  shard: tuple[int, int] = (1, 1)         # K of N, 1-based
  quiet: bool = False
  batch: int = 16
  timeout: float = 10.0                   # seconds one kernel run may take before it is a hang
  compile_timeout: float = 60.0           # seconds one compile (a batch, or one kernel) may take before it is a hang
  reduce: bool = True
  reduce_time: float | None = 60.0        # seconds of reduction per finding at most (None: no clock limit)
  reduce_candidates: int = MAX_CANDIDATES # candidates one reduction may propose at most (the same on every machine)
  max_steps: int = 24
  mode: str = "mix"                       # generation mode: random, tinygrad, corpus, or mix (generate.MODES, MIX)
  cluster: str | None = None              # a Dask cluster (cluster.py: local, local:N, address, scheduler file)
  recheck: bool = True                    # replay each new finding in a fresh process before it counts (recheck.py)
  baseline: str | None = None             # a device the backends derive from: failures it shares on a case don't count

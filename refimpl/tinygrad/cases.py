"""Captured tinygrad kernels as refimpl cases: the fuzzer's finding files (refimpl.fuzz.corpus, format
"refimpl-fuzz-case" version 1), so `python -m refimpl.fuzz replay FILE [--backend NAME]` reruns any of them.

A captured kernel's file holds the program, its inputs as bit patterns and, under "found", where it came from and what
tinygrad computed:

  "signature": {"backend": "PYTHON", "op": "kernel", "dtypes": "CLANG", "kind": "tinygrad-0.10.1"}
  "found": {"source": "tinygrad 0.10.1", "device": "CLANG", "kernel": "r_4_16", "rules": ["acc-id", ...],
            "outputs": [{"dtype", "bits"}, ...]}

The case's own backend is PYTHON: replayed alone it reruns the emulator (the kernel is defined: no undefined behaviour);
`--backend CLANG` runs it on CLANG against the emulator.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from refimpl.fuzz.case import Case
from refimpl.fuzz.corpus import Finding, Signature, atomic_write, finding_to_json, load_finding
from refimpl.fuzz.execute import BackendRef
from refimpl.ir import Program, dtype_to_str
from refimpl.testing.values import from_bits, to_bits

SOURCE = "tinygrad 0.10.1"


def bits_of(arrays: list[np.ndarray], program: Program) -> list[dict]:
  """Buffers as the finding format writes inputs: one {dtype, bits} per DEFINE_GLOBAL."""
  return [{"dtype": dtype_to_str(program.buffers[i].base), "bits": to_bits(a).astype(np.uint64).tolist()}
          for i, a in enumerate(arrays)]


def case_finding(program: Program, inputs: list[np.ndarray], vals: tuple[int, ...], device: str, kernel: str,
                 outputs: list[np.ndarray] | None = None, detail: str = "", rules: list[str] | None = None,
                 source: str | None = None) -> Finding:
  """A captured kernel as a Finding (see the module docstring); outputs are what tinygrad's device computed, rules the
  translation rules that rewrote the kernel (the importer's TRANSLATION_RULES), source the tinygrad line (None:
  SOURCE, 0.10.1)."""
  source = source or SOURCE
  found = {"source": source, "device": device, "kernel": kernel, "rules": sorted(rules or [])}
  if outputs is not None: found["outputs"] = bits_of(outputs, program)
  return Finding(Signature("PYTHON", "kernel", device, source.replace(" ", "-")), Case(program, inputs, vals),
                 BackendRef("PYTHON"), detail or f"{source} {device} kernel {kernel}", found)


def tinygrad_outputs(f: Finding) -> list[np.ndarray] | None:
  """The outputs tinygrad computed, from a captured case's "found" (None when it has none)."""
  outs = f.found.get("outputs")
  if outs is None: return None
  bufs = f.case.program.buffers
  return [from_bits(np.array(o["bits"], dtype=np.uint64), bufs[i].base) for i, o in enumerate(outs)]


def file_stem(kernel: str) -> str:
  return re.sub(r"[^A-Za-z0-9_]+", "_", kernel).strip("_") or "kernel"


def save_case(out: Path, f: Finding) -> Path:
  """Writes <out>/<kernel>.json (atomically), or <kernel>_2.json, ... when another program has that name already.
  A program already saved in `out` is not written again; its path is returned."""
  out = Path(out)
  stem = file_stem(f.found["kernel"])
  for n in range(1, 10_000):
    path = out / (f"{stem}.json" if n == 1 else f"{stem}_{n}.json")
    if not path.exists(): break
    if load_finding(path).case.program == f.case.program: return path
  atomic_write(path, finding_to_json(f))
  return path

"""Finding files: one JSON file per finding plus a ready-to-run pytest file beside it, written atomically; loading them
back with errors that name the file and what is wrong. Replaying them is refimpl/fuzz/corpus.py's (which exports these
names too); this module runs nothing, so the generation modes can read corpus kernels without the worker pool.

The JSON form (plain json, nothing executed on load; never pickle):

  {"format": "refimpl-fuzz-case", "version": 1,
   "signature": {"backend": "CLANG", "op": "IDIV", "dtypes": "int8", "kind": "wrong-value:exact"},
   "backend": "CLANG", "backend_spec": null,          "module:Class" for a backend registered at run time
   "detail": "buffer 0 (signed char) element 3: expected ...",
   "found": {"seed": 0, "index": 17},  "reduced": true,  "uops_before": 96,  "seen": 3,
   "open": null,                                       text: a known, unfixed bug (the corpus test expects a failure)
   "program": { ... the program's own JSON form (refimpl.ir.serialize) ... },
   "inputs": [{"dtype": "int8", "bits": [253, 2, 0, 0]}, ...],       one per buffer, every element's bit pattern
   "vals": [3]}

A signature (backend, op, dtypes, kind) names a finding: two findings with one signature are one bug. The file name is
the signature's slug, e.g. CLANG-IDIV-int8-wrong-value-exact.json, and the pytest file test_<slug>.py replays it.
"""
from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from refimpl.dtype import dtypes
from refimpl.fuzz.case import Case
from refimpl.fuzz.execute import BackendRef
from refimpl.ir import ProgramError, ProgramFormatError, dtype_to_str, parse_dtype, program_from_json, program_to_json
from refimpl.testing.values import from_bits, to_bits

FORMAT, VERSION = "refimpl-fuzz-case", 1
KEYS = ("format", "version", "signature", "backend", "backend_spec", "detail", "found", "reduced", "uops_before", "seen",
        "open", "program", "inputs", "vals")


class CaseFormatError(ValueError):
  """A finding file cannot be read; the message starts with the file's path and says what is wrong."""


@dataclass(frozen=True)
class Signature:
  backend: str
  op: str
  dtypes: str
  kind: str

  @staticmethod
  def of(backend: str, op_key: str, kind: str) -> Signature:
    """From an op key such as "IDIV int8" or "CAST float->int" (see case.op_key)."""
    op, _, dts = op_key.partition(" ")
    return Signature(backend, op or "-", dts or "-", kind)

  def slug(self) -> str:
    text = "-".join((self.backend, self.op, self.dtypes.replace("->", "-to-"), self.kind.replace(":", "-")))
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")

  def __str__(self) -> str: return f"{self.backend} {self.op} {self.dtypes} {self.kind}"


@dataclass
class Finding:
  signature: Signature
  case: Case
  backend: BackendRef
  detail: str = ""
  found: dict = field(default_factory=dict)
  reduced: bool = False
  uops_before: int = 0
  seen: int = 1
  open: str | None = None

  @property
  def kind(self) -> str: return self.signature.kind


# ***** writing *****

def atomic_write(path: Path, text: str) -> None:
  path.parent.mkdir(parents=True, exist_ok=True)
  fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
  try:
    with os.fdopen(fd, "w", encoding="utf-8") as f: f.write(text)
    os.replace(tmp, path)
  except BaseException:
    Path(tmp).unlink(missing_ok=True)
    raise

def finding_to_json(f: Finding) -> str:
  doc = {"format": FORMAT, "version": VERSION, "signature": vars(f.signature), "backend": f.backend.name,
         "backend_spec": f.backend.spec, "detail": f.detail, "found": f.found, "reduced": f.reduced,
         "uops_before": f.uops_before, "seen": f.seen, "open": f.open,
         "program": json.loads(program_to_json(f.case.program)),
         "inputs": [{"dtype": dtype_to_str(f.case.program.buffers[i].base), "bits": to_bits(a).astype(np.uint64).tolist()}
                    for i, a in enumerate(f.case.inputs)],
         "vals": list(f.case.vals)}
  head = {k: v for k, v in doc.items() if k not in ("program", "inputs")}
  body = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in head.items())
  prog = "\n".join("  " + ln for ln in program_to_json(f.case.program).rstrip("\n").splitlines())
  inputs = ",\n".join("    " + json.dumps(x) for x in doc["inputs"])
  return "{\n" + body + ',\n  "program": ' + prog.lstrip() + ',\n  "inputs": [\n' + inputs + "\n  ]\n}\n"

def pytest_text(f: Finding, json_name: str) -> str:
  name = re.sub(r"\W", "_", f.signature.slug().lower())
  return (f'"""A reproducer written by `python -m refimpl.fuzz`: {f.signature}.\n'
          f"{f.detail}\n"
          f'It passes once {f.backend.name} agrees with the spec on this program. Replay: python -m refimpl.fuzz replay '
          f'{json_name}"""\n'
          "from pathlib import Path\n\n"
          "from refimpl.fuzz.corpus import assert_case_passes\n\n\n"
          f"def test_{name}():\n"
          f"  assert_case_passes(Path(__file__).with_name({json_name!r}))\n")

def save_finding(out: Path, f: Finding, name: str | None = None) -> Path:
  """Writes <out>/<name or slug>.json and <out>/test_<...>.py (each atomically: a temporary file, then a rename)."""
  stem = name or f.signature.slug()
  path = Path(out) / f"{stem}.json"
  atomic_write(path, finding_to_json(f))
  atomic_write(Path(out) / f"test_{re.sub(r'[^A-Za-z0-9_]', '_', stem)}.py", pytest_text(f, path.name))
  return path

def remove_finding(path: Path) -> None:
  path = Path(path)
  path.unlink(missing_ok=True)
  (path.parent / f"test_{re.sub(r'[^A-Za-z0-9_]', '_', path.stem)}.py").unlink(missing_ok=True)


# ***** reading *****

def _need(path, cond: bool, what: str) -> None:
  if not cond: raise CaseFormatError(f"{path}: {what}")

def load_finding(path: str | os.PathLike) -> Finding:
  """Reads a finding file; CaseFormatError naming the file and the problem when it is not one."""
  path = Path(path)
  try: text = path.read_text(encoding="utf-8")
  except (OSError, UnicodeDecodeError) as e: raise CaseFormatError(f"{path}: cannot read: {e}") from None
  try: doc = json.loads(text)
  except json.JSONDecodeError as e: raise CaseFormatError(f"{path}: not valid JSON: {e}") from None
  _need(path, isinstance(doc, dict), f"expected a JSON object, got {type(doc).__name__}")
  _need(path, doc.get("format") == FORMAT, f"format must be {FORMAT!r}, got {doc.get('format')!r}")
  _need(path, doc.get("version") == VERSION, f"unsupported version {doc.get('version')!r} (this refimpl reads {VERSION})")
  missing = [k for k in KEYS if k not in doc]
  _need(path, not missing, f"missing key(s) {missing}")
  extra = [k for k in doc if k not in KEYS]
  _need(path, not extra, f"unknown key(s) {extra}")
  sig = doc["signature"]
  _need(path, isinstance(sig, dict) and set(sig) == {"backend", "op", "dtypes", "kind"} and all(isinstance(v, str)
        for v in sig.values()), "signature must be an object of strings backend, op, dtypes, kind")
  _need(path, isinstance(doc["backend"], str) and doc["backend"], "backend must be a device name")
  _need(path, doc["backend_spec"] is None or isinstance(doc["backend_spec"], str), "backend_spec must be null or a string")
  try: program = program_from_json(json.dumps(doc["program"]))
  except (ProgramFormatError, ProgramError) as e: raise CaseFormatError(f"{path}: program: {e}") from None
  bufs = program.buffers
  _need(path, isinstance(doc["inputs"], list) and len(doc["inputs"]) == len(bufs),
        f"inputs must be a list of {len(bufs)} buffers (one per DEFINE_GLOBAL)")
  inputs = []
  for i, x in enumerate(doc["inputs"]):
    where = f"inputs[{i}]"
    _need(path, isinstance(x, dict) and set(x) == {"dtype", "bits"}, f"{where} must be an object with dtype and bits")
    try: dt = parse_dtype(x["dtype"])
    except ValueError as e: raise CaseFormatError(f"{path}: {where}.dtype: {e}") from None
    _need(path, dt == bufs[i].base, f"{where}.dtype is {x['dtype']}, buffer {i} holds {dtype_to_str(bufs[i].base)}")
    bits, width = x["bits"], 1 if dt == dtypes.bool else 8 * dt.itemsize
    got = len(bits) if isinstance(bits, list) else type(bits).__name__
    _need(path, isinstance(bits, list) and len(bits) == bufs[i].size,
          f"{where}.bits must list {bufs[i].size} bit patterns, got {got}")
    bad = next((b for b in bits if not (type(b) is int and 0 <= b < 2 ** width)), None)
    _need(path, bad is None, f"{where}.bits: {bad!r} is not a {width}-bit pattern")
    inputs.append(from_bits(np.array(bits, dtype=np.uint64), dt))
  vals = doc["vals"]
  _need(path, isinstance(vals, list) and len(vals) == len(program.vars) and all(type(v) is int for v in vals),
        f"vals must be a list of {len(program.vars)} ints (one per DEFINE_VAR)")
  for (name, lo, hi), v in zip(program.vars, vals): _need(path, lo <= v <= hi, f"var {name}={v} is outside [{lo}, {hi}]")
  for k, t in (("detail", str), ("found", dict), ("reduced", bool), ("uops_before", int), ("seen", int)):
    _need(path, isinstance(doc[k], t), f"{k} must be a {t.__name__}")
  _need(path, doc["open"] is None or isinstance(doc["open"], str), "open must be null or a string")
  return Finding(Signature(**sig), Case(program, inputs, tuple(vals)), BackendRef(doc["backend"], doc["backend_spec"]),
                 doc["detail"], doc["found"], doc["reduced"], doc["uops_before"], doc["seen"], doc["open"])

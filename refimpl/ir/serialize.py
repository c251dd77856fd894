"""The JSON form of a Program: stable, versioned, human-diffable, and safe to load (plain json, nothing executed).

  {"format": "refimpl-program", "version": 1,
   "name": "E_add_16", "global_size": [16, 1, 1], "local_size": [1, 1, 1],
   "uops": [
    {"op": "DEFINE_GLOBAL", "dtype": "float32.ptr(16)", "src": [], "arg": 0},
    ...
   ]}

- One uop per line, keys in this order; dtypes in the text form of `refimpl.ir.dtype_text`.
- args: tuples are JSON arrays (SPECIAL ["gidx0", 16], DEFINE_VAR ["n", 0, 10], GEP [0, 2], WMMA [N, M, K]).
- CONST args: bool -> true/false; ints -> JSON integers of any size; finite floats -> JSON numbers written with
  Python's shortest round-trip repr, so every float64 (and so every narrower float) comes back bit-exact, -0.0
  included; non-finite floats -> the strings "nan", "inf", "-inf" (JSON has no literal for them; the bare
  NaN/Infinity tokens are rejected on load). NaN carries no sign or payload: a CONST NaN is "a quiet NaN" of its
  dtype, as in the IR itself. A program that needs exact NaN bits BITCASTs an integer CONST.
- Unknown keys, a wrong "format", a version other than 1, bad dtype text or arg shapes give `ProgramFormatError`
  naming the JSON path of the problem; the decoded program is then verified (ProgramError) unless verify=False.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from refimpl.dtype import dtypes
from refimpl.ir.dtype_text import dtype_to_str, parse_dtype
from refimpl.ir.ops import Ops
from refimpl.ir.program import Program, UOp
from refimpl.ir.verify import verify as verify_program

FORMAT, VERSION = "refimpl-program", 1
TOP_KEYS = ("format", "version", "name", "global_size", "local_size", "uops")
UOP_KEYS = ("op", "dtype", "src", "arg")
SPECIAL_FLOATS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


class ProgramFormatError(ValueError):
  """A JSON document is not a valid refimpl program file; the message names where and what."""


def _enc_arg(u: UOp) -> Any:
  a = u.arg
  if isinstance(a, float) and not math.isfinite(a): return "nan" if math.isnan(a) else ("inf" if a > 0 else "-inf")
  return list(a) if isinstance(a, tuple) else a


def program_to_json(p: Program) -> str:
  """The JSON text of a program (it need not be valid; the loader verifies)."""
  head = {"format": FORMAT, "version": VERSION, "name": p.name,
          "global_size": list(p.global_size), "local_size": list(p.local_size)}
  lines = [json.dumps({"op": u.op.name, "dtype": dtype_to_str(u.dtype), "src": list(u.src), "arg": _enc_arg(u)}, allow_nan=False)
           for u in p.uops]
  body = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in head.items())
  return "{\n" + body + ',\n  "uops": [\n' + ",\n".join("    " + x for x in lines) + "\n  ]\n}\n"


def _fail(where: str, what: str):
  raise ProgramFormatError(f"{where}: {what}")

def _is_int(x) -> bool: return isinstance(x, int) and not isinstance(x, bool)

def _tuple(x):
  return tuple(_tuple(y) for y in x) if isinstance(x, list) else x

def _dec_const(where: str, a: Any, dtype) -> Any:
  s = dtype.scalar()
  if s == dtypes.bool or dtypes.is_int(s): return a  # checked by the verifier (const-value)
  if isinstance(a, str):
    if a not in SPECIAL_FLOATS: _fail(where, f"float string must be one of {list(SPECIAL_FLOATS)}, got {a!r}")
    return SPECIAL_FLOATS[a]
  if _is_int(a):
    if float(a) != a: _fail(where, f"integer {a} for a float CONST is not exactly a float64")
    return float(a)
  return a

def _dec_uop(i: int, d: Any) -> UOp:
  where = f"uops[{i}]"
  if not isinstance(d, dict): _fail(where, f"expected an object, got {type(d).__name__}")
  if missing := [k for k in UOP_KEYS if k not in d]: _fail(where, f"missing key(s) {missing}")
  if extra := [k for k in d if k not in UOP_KEYS]: _fail(where, f"unknown key(s) {extra}")
  if not isinstance(d["op"], str) or d["op"] not in Ops.__members__: _fail(f"{where}.op", f"unknown op {d['op']!r}")
  op = Ops[d["op"]]
  try: dtype = parse_dtype(d["dtype"])
  except ValueError as e: _fail(f"{where}.dtype", str(e))
  if not isinstance(d["src"], list) or not all(_is_int(j) for j in d["src"]):
    _fail(f"{where}.src", f"expected a list of ints, got {d['src']!r}")
  arg = _tuple(d["arg"])
  if op is Ops.CONST: arg = _dec_const(f"{where}.arg", arg, dtype)
  elif isinstance(arg, dict): _fail(f"{where}.arg", "objects are not valid args")
  return UOp(op, dtype, tuple(d["src"]), arg)

def _reject_constant(name: str):
  raise ProgramFormatError(f"the JSON literal {name} is not allowed (write non-finite float args as \"nan\", \"inf\", \"-inf\")")

def _no_duplicates(pairs):
  keys = [k for k, _ in pairs]
  if dups := sorted({k for k in keys if keys.count(k) > 1}): raise ProgramFormatError(f"duplicate key(s) {dups}")
  return dict(pairs)


def program_from_json(text: str | bytes, verify: bool = True) -> Program:
  """Parse the JSON text of a program; ProgramFormatError when malformed, ProgramError when it breaks an IR rule."""
  try: doc = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_no_duplicates)
  except json.JSONDecodeError as e: raise ProgramFormatError(f"not valid JSON: {e}") from None
  except RecursionError: raise ProgramFormatError("not valid JSON: nested too deeply") from None
  if not isinstance(doc, dict): _fail("document", f"expected a JSON object, got {type(doc).__name__}")
  if doc.get("format") != FORMAT: _fail("format", f"expected {FORMAT!r}, got {doc.get('format')!r}")
  if "version" not in doc: _fail("version", "missing")
  if not _is_int(doc["version"]) or doc["version"] != VERSION:
    _fail("version", f"unsupported version {doc['version']!r} (this refimpl reads version {VERSION})")
  if missing := [k for k in TOP_KEYS if k not in doc]: _fail("document", f"missing key(s) {missing}")
  if extra := [k for k in doc if k not in TOP_KEYS]: _fail("document", f"unknown key(s) {extra}")
  if not isinstance(doc["name"], str): _fail("name", f"expected a string, got {doc['name']!r}")
  for k in ("global_size", "local_size"):
    if not (isinstance(doc[k], list) and len(doc[k]) == 3 and all(map(_is_int, doc[k]))):
      _fail(k, f"expected 3 ints, got {doc[k]!r}")
  if not isinstance(doc["uops"], list): _fail("uops", f"expected a list, got {type(doc['uops']).__name__}")
  uops = tuple(_dec_uop(i, d) for i, d in enumerate(doc["uops"]))
  p = Program(doc["name"], uops, tuple(doc["global_size"]), tuple(doc["local_size"]))
  return verify_program(p) if verify else p


def save_program(p: Program, path: str | os.PathLike) -> None:
  """Write the JSON form to `path` atomically (a temporary file in the same folder, then a rename)."""
  path = Path(path)
  fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
  try:
    with os.fdopen(fd, "w", encoding="utf-8") as f: f.write(program_to_json(p))
    os.replace(tmp, path)
  except BaseException:
    Path(tmp).unlink(missing_ok=True)
    raise


def load_program(path: str | os.PathLike, verify: bool = True) -> Program:
  """Read a program written by save_program (or by hand)."""
  return program_from_json(Path(path).read_text(encoding="utf-8"), verify=verify)

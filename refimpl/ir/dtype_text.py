"""The readable text form of dtypes used by listings and by the JSON form, and its parser (no eval).

Grammar (whitespace inside the parentheses is optional):
  dtype   := NAME [ ".vec(" N ")" ] [ ".ptr(" SIZE [ ", local=" ("True"|"False") ] ")" ]
  NAME    := void | bool | int8 | uint8 | int16 | uint16 | int32 | uint32 | int64 | uint64
           | float16 | bfloat16 | float32 | float64 | fp8e4m3 | fp8e5m2      (the fp8 names where dtype.py has them)
Examples: "float32", "float32.vec(4)", "float32.ptr(16)", "float32.ptr(16, local=True)".
Only canonical names are written or read (no C names, no aliases such as "half"), so one dtype has one spelling.
Vectors of pointers and image dtypes have no text form: the kernel IR does not use them.
"""
from __future__ import annotations

import re

from refimpl.dtype import DType, ImageDType, PtrDType, dtypes

CANONICAL_NAMES = ("void", "bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
                   "float16", "bfloat16", "float32", "float64", "fp8e4m3", "fp8e5m2")
NAME_TO_DTYPE: dict[str, DType] = {n: getattr(dtypes, n) for n in CANONICAL_NAMES if isinstance(getattr(dtypes, n, None), DType)}
DTYPE_TO_NAME: dict[DType, str] = {v: k for k, v in NAME_TO_DTYPE.items()}

_DTYPE_RE = re.compile(r"(?P<name>[a-z0-9_]+)(?:\.vec\(\s*(?P<vec>\d+)\s*\))?"
                       r"(?:\.ptr\(\s*(?P<size>-?\d+)\s*(?:,\s*local\s*=\s*(?P<local>True|False)\s*)?\))?")


def dtype_to_str(dt: DType) -> str:
  """The canonical text of a dtype, e.g. "float32.vec(4)" or "int8.ptr(16, local=True)"."""
  if isinstance(dt, ImageDType): raise ValueError(f"image dtypes have no text form in the kernel IR: {dt!r}")
  if isinstance(dt, PtrDType):
    if dt.v != 1: raise ValueError(f"vectors of pointers have no text form in the kernel IR: {dt!r}")
    return f"{dtype_to_str(dt.base)}.ptr({dt.size}{', local=True' if dt.local else ''})"
  scalar = dt.scalar()
  if scalar not in DTYPE_TO_NAME: raise ValueError(f"dtype {dt!r} has no canonical name")
  return DTYPE_TO_NAME[scalar] + (f".vec({dt.count})" if dt.count != 1 else "")


def parse_dtype(text: str) -> DType:
  """Parse the text written by `dtype_to_str`. Raises ValueError naming what is wrong; never evaluates anything."""
  if not isinstance(text, str): raise ValueError(f"a dtype must be a string, got {type(text).__name__}")
  if (m := _DTYPE_RE.fullmatch(text.strip())) is None:
    raise ValueError(f"malformed dtype {text!r} (expected e.g. 'float32.vec(4)')")
  if (dt := NAME_TO_DTYPE.get(m["name"])) is None:
    raise ValueError(f"unknown dtype name {m['name']!r} in {text!r} (known: {', '.join(NAME_TO_DTYPE)})")
  if m["vec"] is not None:
    if dt == dtypes.void or (n := int(m["vec"])) < 2:
      raise ValueError(f"bad vector in dtype {text!r} (needs a non-void scalar, count >= 2)")
    dt = dt.vec(n)
  if m["size"] is not None: dt = dt.ptr(int(m["size"]), local=m["local"] == "True")
  return dt

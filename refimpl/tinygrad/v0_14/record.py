"""KernelRecord: a linearized tinygrad 0.14 kernel as plain data, and its JSON form.

Each uop is a `Rec`: tinygrad's op name; its scalar dtype by tinygrad's attribute name ("float32", "int32", "bool",
"weakint", "void"); its shape (None for uops that have none: IF, BARRIER, SINK, ...; () for a scalar); its address space
("GLOBAL", "LOCAL", "REG", "ALU" or None); its arg as JSON data; its srcs as indices of earlier uops. Args:

  CONST            an int or bool; a float as {"float64": "<hex bits>"} (keeps -0.0 and NaN payloads)
  PARAM, BUFFER    {"slot", "name", "min", "max"} (a buffer's are null but slot; a variable's name and bounds)
  SPECIAL          its name ("gidx0" .. "lidx2")
  RANGE            [axis id, axis type name]
  SINK             {"name": the kernel's name}
  CAST, BITCAST    null (the target is the uop's dtype)
  others           null, or repr() of an arg the record does not model (the importer rejects those)
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any

FORMAT, VERSION = "tinygrad-0.14-kernel", 1
SOURCE = "tinygrad 0.14.0"  # the line a case names as where its kernel came from (refimpl.tinygrad.cases)


class RecordFormatError(ValueError):
  """A kernel record that is not this format (named by what is wrong)."""


@dataclass(frozen=True)
class Rec:
  op: str
  dtype: str
  shape: tuple[int, ...] | None
  addrspace: str | None
  arg: Any
  src: tuple[int, ...]


@dataclass(frozen=True)
class KernelRecord:
  name: str
  uops: tuple[Rec, ...]
  global_size: tuple[int, int, int]
  local_size: tuple[int, int, int]


def float_arg(x: float) -> dict:
  """A float CONST's arg: its float64 bits."""
  return {"float64": f"{struct.unpack('<Q', struct.pack('<d', x))[0]:016x}"}


def float_of(arg: dict) -> float:
  return struct.unpack("<d", struct.pack("<Q", int(arg["float64"], 16)))[0]


def to_json(k: KernelRecord) -> dict:
  uops = [{"op": r.op, "dtype": r.dtype, "shape": None if r.shape is None else list(r.shape), "addrspace": r.addrspace,
           "arg": r.arg, "src": list(r.src)} for r in k.uops]
  return {"format": FORMAT, "version": VERSION, "name": k.name, "global_size": list(k.global_size),
          "local_size": list(k.local_size), "uops": uops}


def _arg(x: Any) -> Any:
  return tuple(_arg(v) for v in x) if isinstance(x, list) else x


def from_json(doc: Any) -> KernelRecord:
  """The record of a JSON document; RecordFormatError when it is not one."""
  if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
    raise RecordFormatError(f"not a {FORMAT} version {VERSION} document")
  try:
    uops = tuple(Rec(u["op"], u["dtype"], None if u["shape"] is None else tuple(u["shape"]), u["addrspace"], _arg(u["arg"]),
                     tuple(u["src"])) for u in doc["uops"])
    return KernelRecord(doc["name"], uops, tuple(doc["global_size"]), tuple(doc["local_size"]))
  except (KeyError, TypeError) as e: raise RecordFormatError(f"a uop or field is malformed: {e!r}") from None


def dumps(k: KernelRecord) -> str:
  return json.dumps(to_json(k))

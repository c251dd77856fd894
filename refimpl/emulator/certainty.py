"""Certainty: how much of an element's value the spec pins down. One level per element (`Certainty`, ordered from the
most certain), held by alu's Outcomes, the executor's values and memories, and the Emulation a run returns; levels are
joined here and nowhere else.

Join (`join`) is the maximum. A result element's level is join(the level its rule gives it, carry(each operand
element's level)), where `carry` says what a level becomes through a computation: EXACT and UNDEFINED stay, NAN_PAYLOAD
stays (no op but BITCAST lets a NaN's payload change a value: `carry_bits`), and TOLERANCE, ERROR_BOUND and
ALLOWED_SET become UNKNOWN (what is computed from an uncertain value is uncertain in a way no one rule bounds). So a
join never meets two of those three middle levels, which are not comparable with each other: a rule gives one of them,
and every operand's level arrives carried. Moves (LOAD, STORE, ASSIGN, GEP, VECTORIZE and the value WHERE picks) keep
a level unchanged; a value that decides control or an address (a gate, a loop bound, an index) gives what it decides
its carried level. An element is *loose* when its level is neither EXACT nor UNDEFINED.
"""
from __future__ import annotations

from enum import IntEnum

import numpy as np

LEVEL = np.uint8  # the numpy type of a level array; None stands for EXACT everywhere


class Certainty(IntEnum):
  """The levels, ordered from the most certain; `meaning`: what the spec promises of an element of that level; `code`:
  the level as an element of a level array."""
  EXACT = 0, "one bit pattern"
  NAN_PAYLOAD = 1, "one value up to a NaN's payload: any NaN stands for any other (a non-NaN is its one bit pattern)"
  TOLERANCE = 2, ("a tolerance op's result (its rule declared `@loose(TOLERANCE)`): within the op's ULP bound of the "
                  "reference (refimpl.spec.ulp_bound); where the reference is NaN, +-inf or +-0, exactly that value")
  ERROR_BOUND = 3, "a WMMA result: within the WMMA rule's error bound of the reference (compute.wmma_error_bound)"
  ALLOWED_SET = 4, ("an allowed-set op's result (its rule declared `@loose(ALLOWED_SET, other=...)`): equal to one of "
                    "its allowed results (alu.allowed_results)")
  UNKNOWN = 5, ("computed from, or decided by (an index, a gate, a loop bound), an element of one of the three levels "
                "above: the spec allows values the emulator cannot state element by element")
  UNDEFINED = 6, "undefined behaviour reached it: no value is promised"

  def __new__(cls, value: int, meaning: str) -> Certainty:
    level = int.__new__(cls, value)
    level._value_ = value
    level.meaning = meaning  # type: ignore[attr-defined]
    level.code = LEVEL(value)  # type: ignore[attr-defined]
    return level

EXACT, NAN_PAYLOAD, UNKNOWN, UNDEFINED = (LEVEL(c) for c in (Certainty.EXACT, Certainty.NAN_PAYLOAD, Certainty.UNKNOWN,
                                                             Certainty.UNDEFINED))

def carried_level(level: Certainty, payload_shows: bool = False) -> Certainty:
  """The carry rule for one level (the module docstring); payload_shows: through BITCAST."""
  if level in (Certainty.EXACT, Certainty.UNDEFINED): return level
  if level == Certainty.NAN_PAYLOAD and not payload_shows: return level
  return Certainty.UNKNOWN

_CARRY = np.array([carried_level(c) for c in Certainty], LEVEL)  # indexed by level: carry as one numpy take
_CARRY_BITS = np.array([carried_level(c, payload_shows=True) for c in Certainty], LEVEL)


def join(*levels: np.ndarray | None) -> np.ndarray | None:
  """The elementwise join (maximum) of level arrays that broadcast together; None (all EXACT) when every one is."""
  out = None
  for x in levels:
    if x is not None: out = x if out is None else np.maximum(out, x)
  return out

def carry(levels: np.ndarray | None) -> np.ndarray | None:
  """The level of what an op computes from elements of these levels (the module docstring)."""
  return None if levels is None else _CARRY[levels]

def carry_bits(levels: np.ndarray | None) -> np.ndarray | None:
  """carry for BITCAST, which reads a NaN's payload: a NaN-payload element gives an UNKNOWN one."""
  return None if levels is None else _CARRY_BITS[levels]

def of_loose(values: np.ndarray, loose: np.ndarray | None, level: Certainty) -> np.ndarray | None:
  """The levels of an op's own result (`loose` of the values' shape, holding every NaN the op produced): NAN_PAYLOAD on
  its NaN elements, `level` on its other loose ones."""
  if loose is None: return None
  if level is Certainty.NAN_PAYLOAD: return loose.view(LEVEL)  # a bool is one byte, 0 or 1: EXACT or NAN_PAYLOAD
  out = loose.view(LEVEL) * level.code
  np.putmask(out, np.isnan(values), NAN_PAYLOAD)
  return out

def where_undefined(levels: np.ndarray | None, undefined: np.ndarray | None) -> np.ndarray | None:
  """levels with UNDEFINED where `undefined` (a bool mask) is set."""
  if undefined is None: return levels
  marks = undefined.view(LEVEL) * UNDEFINED
  return marks if levels is None else np.maximum(levels, marks)

def is_one_value(levels: np.ndarray) -> np.ndarray:
  """Elements the spec pins to one value (EXACT, NAN_PAYLOAD): equal bits, or both NaN (refimpl.testing's same_value)."""
  return levels <= NAN_PAYLOAD

def is_loose(levels: np.ndarray) -> np.ndarray:
  """Elements that are neither EXACT nor UNDEFINED."""
  return (levels > EXACT) & (levels < UNDEFINED)

def is_undefined(levels: np.ndarray) -> np.ndarray: return levels == UNDEFINED

"""Straight-line stretches: the handler loop taken out of runs of ops that open and close no block.

A run executes a program by calling each op's handler in turn (machine.Machine.run). Between two block boundaries
(RANGE, IF and their ends) every op executes, in order, each time the stretch is entered, so such a stretch can be
one Python function. `compile_stretches` writes one per stretch of at least two ops; the handler table then holds it
at the stretch's first op, and it returns the index after the stretch, as a block's handler does.

Each op of a stretch is written as its *inline form* where its handler has one (machine.INLINE: the handler's path
for exact operands, as a guard and an expression), falling back to a call of the handler where the guard fails, and as
a call of its handler otherwise. An operand the stretch computed itself is a Python local; one from before the stretch
is read through Machine.value_of once (registers, which an ASSIGN of the stretch may change, at every use). The
function computes what the handler loop computes, op for op: it only removes the interpretation around the handlers
(spec_tests/test_emulator_straight.py holds every corpus program to the handler loop).

A loop that runs as lanes skips the ops its folds compute (loops.LaneLoop.folded): `breaks` keeps them out of every
stretch, so such a loop's handler table still reaches them one by one.
"""
from __future__ import annotations

import linecache
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from refimpl.ir import GroupOp, Ops, UOp


class Form(NamedTuple):
  """An op's inline form, as source: `before` (a statement, or None) runs first; where `guard` holds (None: always),
  the op's value is `value` (None: the op has none, and the guard did its work), else the op's handler runs."""
  guard: str | None
  value: str | None
  before: str | None = None

# (plan, uop index, uop, operand, bind) -> its Form, or None where it has none here. operand(j) -> the expression of uop
# j's Value (read before the op where needed); bind(obj) -> the name obj has in the function
Inline = Callable[[Any, int, UOp, Callable[[int], str], Callable[[Any], str]], Form | None]


def stretches(uops: Sequence[UOp], breaks: set[int] | frozenset[int]) -> list[tuple[int, int]]:
  """[lo, hi) of every maximal run of at least two consecutive ops of which none opens or closes a block or is in
  `breaks`."""
  out, lo = [], None
  for i, u in enumerate([*uops, None]):
    inside = u is not None and u.op not in GroupOp.BlockStart and u.op not in GroupOp.BlockEnd and i not in breaks
    if inside and lo is None: lo = i
    elif not inside and lo is not None:
      if i - lo >= 2: out.append((lo, i))
      lo = None
  return out


class _Writer:
  """The source of one stretch's function and the objects its names stand for."""
  def __init__(self):
    self.lines: list[str] = []
    self.names: dict[str, Any] = {}
    self.ids: dict[int, str] = {}

  def bind(self, obj: Any, hint: str = "") -> str:
    """The name of obj in the function (one per object): hint, or its own name, and a number."""
    if id(obj) not in self.ids:
      hint = hint or (getattr(obj, "__name__", "") if callable(obj) else "")
      hint = "".join(c for c in hint if c.isalnum() or c == "_").strip("_") or "k"
      self.ids[id(obj)] = f"{hint}_{len(self.ids)}"
      self.names[self.ids[id(obj)]] = obj
    return self.ids[id(obj)]


def compile_stretch(plan: Any, lo: int, hi: int, handlers: Sequence[Callable], inline: dict[Callable, Inline],
                    quiet: set[Callable], values: set[Callable], registers: set[int]) -> Callable:
  """The function that runs ops lo..hi-1 of plan.uops as `handlers` would and returns hi. quiet: handlers that do
  nothing; values: handlers that always leave a plain Value in the env; registers: the uops that read as a register
  (DEFINE_ACC and ASSIGN), which value_of reads at every use."""
  w, uops = _Writer(), plan.uops
  local: dict[int, str] = {}  # uop -> the local holding its value in this function
  def operand(j: int) -> str:
    if j in registers: return f"m.value_of({j})"
    if j not in local:
      local[j] = f"v{j}"
      w.lines.append(f"  v{j} = env[{j}]" if lo <= j < hi and handlers[j] in values else f"  v{j} = m.value_of({j})")
    return local[j]
  for i in range(lo, hi):
    u, h = uops[i], handlers[i]
    w.lines.append(f"  # {i}: {u.op.name} {u.dtype} {u.src}")
    if h in quiet: continue
    call = f"{w.bind(h)}(m, {i}, {w.bind(u, f'u{i}')})"
    form = inline[h](plan, i, u, operand, w.bind) if h in inline else None
    if form is None:
      w.lines.append(f"  {call}")
      continue
    if form.before is not None: w.lines.append(f"  {form.before}")
    if form.value is None: w.lines.append(f"  if not ({form.guard}): {call}")  # the guard did the op's work
    elif h not in values:  # not a value later ops read as a local (a Ref, a lazy form)
      w.lines.append(f"  env[{i}] = {form.value}")
    elif form.guard is None:
      w.lines.append(f"  env[{i}] = v{i} = {form.value}")
      local[i] = f"v{i}"
    else:
      w.lines += [f"  if {form.guard}: env[{i}] = v{i} = {form.value}", f"  else: {call}; v{i} = env[{i}]"]
      local[i] = f"v{i}"
  name = f"stretch_{lo}_{hi}"
  source = "\n".join([f"def {name}(m, i, u):", "  env = m.env", *w.lines, f"  return {hi}", ""])
  filename = f"<refimpl stretch {plan.program.name} {lo}..{hi - 1}>"
  linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # tracebacks show the line
  exec(compile(source, filename, "exec"), w.names)  # the source is the one written above, from the plan
  fn = w.names[name]
  fn.source = source
  return fn


def compile_stretches(plan: Any, handlers: Sequence[Callable], breaks: set[int] | frozenset[int],
                      inline: dict[Callable, Inline], quiet: set[Callable], values: set[Callable]) -> list[Callable]:
  """`handlers` with each stretch's function (compile_stretch) at the stretch's first op."""
  out = list(handlers)
  registers = {i for i, u in enumerate(plan.uops) if u.op in (Ops.DEFINE_ACC, Ops.ASSIGN)}
  for lo, hi in stretches(plan.uops, breaks):
    out[lo] = compile_stretch(plan, lo, hi, handlers, inline, quiet, values, registers)
  return out

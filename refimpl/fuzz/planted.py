"""Deliberately broken backends: a registered device with one planted bug each, to test the fuzzer (and to watch it work:
`python -m refimpl.fuzz --backend refimpl.fuzz.planted:FloorDivClang --iterations 200`).

CLANG only, planted in the C renderer:
  FloorDivClang   IDIV on signed ints rounds toward minus infinity (Python's //) instead of toward zero
  NanMaxClang     float MAX is (a > b ? a : b): a NaN first operand is dropped (max(NaN, 1) = 1)
  SegfaultClang   kernels whose program has a float CMPNE write through a null pointer (SIGSEGV)
  HangClang       kernels whose program has a float CMPNE spin forever
  StaleClang      state leaking between kernels: from its 9th program in a process on, float MUL is rendered as ADD
                  (a finding no fresh-process replay reproduces: the fuzzer's re-check sets it apart, recheck.py)

The four classes real backends have (issue 17), each in a CLANG, an LLVM and a GPU variant (<Class>Clang, <Class>LLVM,
<Class>GPU). The bug is planted as a rewrite of the program just before the backend renders it, so every backend gets
exactly the same wrong semantics whatever its renderer looks like (the renderer's extra_rewrite, run by lower_for before
the shared lowering passes):
  Contract        a float16 / bfloat16 / float32 ADD or SUB with a MUL operand is computed fused: the product and the
                  sum in the next wider float (float32 / float64: the product is exact there), rounded once at the end
                  (clang's -ffp-contract=fast; float64 has no wider format in the IR and is left alone)
  LongToFloat     int64 -> float32 CAST goes through float64 (two roundings: an int just above a float32 tie lands on
                  the tie in float64 and then on the even neighbour)
  DoubleToHalf    float64 -> float16 CAST goes through float32 (the same double rounding)
  FlushMul        a float32 MUL result below the smallest normal (2^-126) in magnitude becomes a zero of its sign (FTZ)
`CLASSES` lists them with the signatures (op, dtypes) a finding of each class is filed under.
  RelaxedGPU      the GPU device with the build option -cl-fast-relaxed-math (the class only whole programs caught)

Each subclasses whatever class is registered under its base name (never importing a backend module by path), keeps
that device's renderer instance with its class swapped for a planted subclass, and is subprocess-safe, so the fuzzer's
spawned workers open them by "refimpl.fuzz.planted:<Class>". A variant whose base device is not registered or does not
import here raises DeviceUnavailable when opened.
"""
from __future__ import annotations

import copy

from refimpl.device import Device, DeviceUnavailable
from refimpl.dtype import dtypes
from refimpl.fuzz.graph import Graph, Node, const_node
from refimpl.ir import Ops, Program

FLT_MIN = 2.0 ** -126


def _float_cmpne(program: Program) -> bool:
  return any(u.op is Ops.CMPNE and dtypes.is_float(program.uops[u.src[0]].dtype) for u in program.uops)


def _renderer_class(base: type, alu=None, tail=None, rewrite=None) -> type:
  """A subclass of renderer class `base` whose alu() may be replaced per op, whose kernels may get a tail statement, and
  whose programs may be rewritten before they are lowered (extra_rewrite, which refimpl.lower.lower_for calls)."""
  def alu_fn(self, op, dt, src, src_dt):
    text = None if alu is None else alu(op, dt, src, src_dt)
    return base.alu(self, op, dt, src, src_dt) if text is None else text
  tails: dict[str, str | None] = {}  # program name -> its tail, decided on the program before it is lowered
  def extra_rewrite(self, program: Program) -> Program:
    if tail is not None: tails[program.name] = tail(program)
    return base.extra_rewrite(self, program if rewrite is None else rewrite(program))
  def render(self, name: str, program: Program) -> str:
    src = base.render(self, name, program)
    stmt = tails.pop(program.name, None)
    if stmt is not None:
      cut = src.rstrip().rfind("}")
      src = src[:cut] + f"  {stmt}\n}}\n"
    return src
  body = {"render": render, "extra_rewrite": extra_rewrite, **({"alu": alu_fn} if alu is not None else {})}
  return type(f"Planted{base.__name__}", (base,), body)


def _plant(renderer, alu=None, tail=None, rewrite=None):
  """A copy of a renderer instance whose class is the planted subclass of its own (frozen dataclasses included)."""
  out = copy.copy(renderer)
  object.__setattr__(out, "__class__", _renderer_class(type(renderer), alu, tail, rewrite))
  return out


def _base_class(name: str) -> type | None:
  try: return Device.device_class(name)
  except Exception: return None  # not registered here, or its module does not import


def planted_device(base: str, cls_name: str, alu=None, tail=None, rewrite=None) -> type:
  """A device class: the device registered as `base` with the planted renderer hooks."""
  parent = _base_class(base)
  if parent is None:
    def unavailable(self, device: str | None = None):
      raise DeviceUnavailable(f"{cls_name}: its base device {base} is not available here")
    return type(cls_name, (), {"__init__": unavailable, "subprocess_safe": True, "__module__": __name__})
  def init(self, device: str | None = None):
    parent.__init__(self, device or cls_name.upper())
    self.renderer = _plant(self.renderer, alu, tail, rewrite)
  return type(cls_name, (parent,), {"__init__": init, "subprocess_safe": True, "__module__": __name__,
                                    "__doc__": f"{base} with a planted bug ({cls_name})."})


# ***** the CLANG-only renderer bugs *****

def _floor_idiv(op, dt, src, src_dt):
  if op is Ops.IDIV and src_dt in dtypes.sints:
    a, b = src
    return f"(({a}/{b})-((({a}%{b})!=0)&&((({a})<0)!=(({b})<0))))"
  return None

def _nan_dropping_max(op, dt, src, src_dt):
  if op is Ops.MAX and dtypes.is_float(src_dt) and src_dt in (dtypes.float32, dtypes.float64):
    return f"({src[0]}>{src[1]}?{src[0]}:{src[1]})"
  return None

STALE_AFTER = 8  # StaleClang's correct programs in each process
_programs_seen = [0]  # StaleClang's programs rendered in this process (the planted leak)

def _count_program(program: Program) -> None:
  _programs_seen[0] += 1

def _stale_mul(op, dt, src, src_dt):
  if op is Ops.MUL and src_dt == dtypes.float32 and _programs_seen[0] > STALE_AFTER: return f"({src[0]}+{src[1]})"
  return None

FloorDivClang = planted_device("CLANG", "FloorDivClang", alu=_floor_idiv)
NanMaxClang = planted_device("CLANG", "NanMaxClang", alu=_nan_dropping_max)
SegfaultClang = planted_device("CLANG", "SegfaultClang", tail=lambda p: "*(volatile int*)0 = 0;" if _float_cmpne(p) else None)
HangClang = planted_device("CLANG", "HangClang", tail=lambda p: "for (;;) __asm__ volatile(\"\");" if _float_cmpne(p) else None)
StaleClang = planted_device("CLANG", "StaleClang", alu=_stale_mul, tail=_count_program)


# ***** the four classes, as program rewrites *****

WIDER = {dtypes.float16: dtypes.float32, dtypes.bfloat16: dtypes.float32, dtypes.float32: dtypes.float64}

def _vec(s, n: int): return s.vec(n) if n > 1 else s

def _rewriting(fn):
  """A Program -> Program rewrite from an in-place Graph edit."""
  def rewrite(program: Program) -> Program:
    g = Graph.from_program(program)
    fn(g)
    return g.program()
  return rewrite

def _fused(n: Node, w) -> list[Node]:
  """The nodes computing ADD/SUB node n with its MUL operands fused: every operand widened to w, one op each there."""
  wdt = _vec(w, n.dtype.count)
  new: list[Node] = []
  srcs = []
  for x in n.src:
    if x.op is Ops.MUL:
      a, b = Node(Ops.CAST, wdt, [x.src[0]]), Node(Ops.CAST, wdt, [x.src[1]])
      new += [a, b, Node(Ops.MUL, wdt, [a, b])]
    else: new.append(Node(Ops.CAST, wdt, [x]))
    srcs.append(new[-1])
  return new + [Node(n.op, wdt, srcs)]

@_rewriting
def contract(g: Graph) -> None:
  """ADD/SUB with a MUL operand (float16, bfloat16, float32): operands widened, product and sum wide, one rounding."""
  for n in list(g.nodes):
    w = WIDER.get(n.dtype.scalar())
    if n.op not in (Ops.ADD, Ops.SUB) or w is None or not any(x.op is Ops.MUL for x in n.src): continue
    new = _fused(n, w)
    g.insert_before(n, new)
    n.op, n.src = Ops.CAST, [new[-1]]

def _through(src, mid, dst):
  @_rewriting
  def rewrite(g: Graph) -> None:
    for n in list(g.nodes):
      if n.op is Ops.CAST and n.dtype.scalar() == dst and n.src[0].dtype.scalar() == src:
        m = Node(Ops.CAST, _vec(mid, n.dtype.count), [n.src[0]])
        g.insert_before(n, [m])
        n.src = [m]
  rewrite.__doc__ = f"CAST {src.name} -> {dst.name} through {mid.name}."
  return rewrite

long_to_float = _through(dtypes.int64, dtypes.float64, dtypes.float32)
double_to_half = _through(dtypes.float64, dtypes.float32, dtypes.float16)

@_rewriting
def flush_mul(g: Graph) -> None:
  """float32 MUL: |r| < 2^-126 gives r * 0 (a zero of r's sign), else r."""
  for n in list(g.nodes):
    if n.op is not Ops.MUL or n.dtype.scalar() != dtypes.float32: continue
    cnt = n.dtype.count
    r = Node(Ops.MUL, n.dtype, list(n.src))
    neg = Node(Ops.NEG, n.dtype, [r])
    mag = Node(Ops.MAX, n.dtype, [r, neg])
    lim, zero = const_node(FLT_MIN, n.dtype), const_node(0.0, n.dtype)
    tiny = Node(Ops.CMPLT, _vec(dtypes.bool, cnt), [mag, lim[-1]])
    signed_zero = Node(Ops.MUL, n.dtype, [r, zero[-1]])
    g.insert_before(n, [r, neg, mag, *lim, *zero, tiny, signed_zero])
    n.op, n.src = Ops.WHERE, [tiny, signed_zero, r]


# class -> (rewrite, the (op, dtypes) signatures its findings are filed under)
_CONTRACTED = {(op, dt.name) for op in ("ADD", "SUB") for dt in WIDER}
CLASSES = {
  "Contract": (contract, _CONTRACTED),
  "LongToFloat": (long_to_float, {("CAST", "long->float")}),
  "DoubleToHalf": (double_to_half, {("CAST", "double->half")}),
  "FlushMul": (flush_mul, {("MUL", "float")}),
}
VARIANTS = {"Clang": "CLANG", "LLVM": "LLVM", "GPU": "GPU"}

for _cls, (_rw, _) in CLASSES.items():
  for _suffix, _base in VARIANTS.items():
    globals()[_cls + _suffix] = planted_device(_base, _cls + _suffix, rewrite=_rw)

PLANTED_CLASSES = [c + s for c in CLASSES for s in VARIANTS]


def _relaxed_gpu() -> type:
  """The GPU device built with -cl-fast-relaxed-math (the GPU class only whole programs caught, issue 17): no NaN,
  infinity or signed-zero semantics, contraction and reassociation allowed."""
  parent = _base_class("GPU")
  if parent is None: return planted_device("GPU", "RelaxedGPU")
  def init(self, device: str | None = None):
    parent.__init__(self, device or "RELAXEDGPU")
    self.options = (*self.options, "-cl-fast-relaxed-math")
    self.compiler = type(self.compiler)(self)  # its cache key names the options
  return type("RelaxedGPU", (parent,), {"__init__": init, "subprocess_safe": True, "__module__": __name__,
                                         "__doc__": _relaxed_gpu.__doc__})

RelaxedGPU = _relaxed_gpu()
__all__ = ["CLASSES", "FloorDivClang", "HangClang", "NanMaxClang", "PLANTED_CLASSES", "RelaxedGPU", "SegfaultClang",
           "StaleClang", "VARIANTS", *PLANTED_CLASSES]

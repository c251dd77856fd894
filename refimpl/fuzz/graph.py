"""A program as an editable graph: `Node`s whose srcs are other nodes (not indices), kept in one list in program order.

The generator builds programs this way, the UB fixer inserts guard nodes in the middle of them, and the reducer deletes
and replaces nodes, none of them renumbering anything by hand. `Graph.program()` linearizes: declarations (DEFINE_GLOBAL,
DEFINE_VAR, DEFINE_LOCAL) are hoisted to the front in list order and DEFINE_GLOBAL is renumbered 0, 1, 2, ... in that
order (so the buffer list of a Case follows `Graph.globals()`), every other node keeps its list position.
Nodes are mutable on purpose: a CONST's arg or a buffer's size may be set after the nodes that use it exist.
"""
from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any

from refimpl.dtype import DType, dtypes
from refimpl.ir import GroupOp, Ops, Program, UOp, verify

DECLS = GroupOp.Declaration
EFFECTS = frozenset({Ops.STORE, Ops.BARRIER}) | GroupOp.BlockStart | GroupOp.BlockEnd | DECLS
PURE = GroupOp.ALU | {Ops.CONST, Ops.INDEX, Ops.VECTORIZE, Ops.GEP, Ops.CAST, Ops.BITCAST}


def _arg_key(arg: Any):
  """A node arg as a dict key that tells -0.0 from 0.0 and NaN payloads apart."""
  return ("f", struct.pack("<d", arg)) if isinstance(arg, float) else repr(arg)


class Node:
  """One uop with node srcs. `tag` is free for the creator (the generator stores the step that made the node)."""
  __slots__ = ("arg", "dtype", "op", "src", "tag")
  def __init__(self, op: Ops, dtype: DType = dtypes.void, src: Iterable[Node] = (), arg: Any = None, tag: Any = None):
    self.op, self.dtype, self.src, self.arg, self.tag = op, dtype, list(src), arg, tag
  def __repr__(self) -> str: return f"Node({self.op.name}, {self.dtype!r}, arg={self.arg!r})"


class Graph:
  """Nodes in program order plus the launch dims (lists, so that passes can change them)."""
  def __init__(self, nodes: list[Node], name: str = "fuzz", global_size=(1, 1, 1), local_size=(1, 1, 1)):
    self.nodes, self.name = nodes, name
    self.global_size, self.local_size = list(global_size), list(local_size)

  @staticmethod
  def from_program(p: Program) -> Graph:
    nodes: list[Node] = []
    for u in p.uops: nodes.append(Node(u.op, u.dtype, [nodes[j] for j in u.src], u.arg))
    return Graph(nodes, p.name, p.global_size, p.local_size)

  def copy(self) -> tuple[Graph, dict[int, Node]]:
    """A deep copy and the map id(old node) -> new node."""
    m: dict[int, Node] = {}
    for n in self.ordered(): m[id(n)] = Node(n.op, n.dtype, [m[id(s)] for s in n.src], n.arg, n.tag)
    return Graph([m[id(n)] for n in self.nodes], self.name, self.global_size, self.local_size), m

  def ordered(self) -> list[Node]:
    """The nodes in linear order: declarations first."""
    return [n for n in self.nodes if n.op in DECLS] + [n for n in self.nodes if n.op not in DECLS]

  def globals(self) -> list[Node]: return [n for n in self.nodes if n.op is Ops.DEFINE_GLOBAL]

  def linearize(self) -> tuple[list[UOp], dict[int, int], list[Node]]:
    """(uops, id(node) -> index, nodes in index order)."""
    order = self.ordered()
    index = {id(n): i for i, n in enumerate(order)}
    uops, nglobal = [], 0
    for n in order:
      arg = n.arg
      if n.op is Ops.DEFINE_GLOBAL: arg, nglobal = nglobal, nglobal + 1
      try: src = tuple(index[id(s)] for s in n.src)
      except KeyError: raise ValueError(f"{n!r} uses a node that is not in the graph") from None
      uops.append(UOp(n.op, n.dtype, src, arg))
    return uops, index, order

  def program(self, name: str | None = None, check: bool = True) -> Program:
    uops, _, _ = self.linearize()
    p = Program(name or self.name, tuple(uops), tuple(self.global_size), tuple(self.local_size))
    return verify(p) if check else p

  def users(self) -> dict[int, list[Node]]:
    """id(node) -> the nodes that take it as a src."""
    out: dict[int, list[Node]] = {}
    for n in self.nodes:
      for s in n.src: out.setdefault(id(s), []).append(n)
    return out

  def replace_uses(self, old: Node, new: Node) -> None:
    for n in self.nodes: n.src = [new if s is old else s for s in n.src]

  def insert_before(self, anchor: Node, new: list[Node]) -> None:
    i = next(k for k, n in enumerate(self.nodes) if n is anchor)
    self.nodes[i:i] = new

  def merge_duplicates(self) -> None:
    """Common subexpressions: a pure node (PURE ops, and ungated LOADs of buffers no STORE writes) with the same op,
    dtype, arg and srcs as an earlier one visible at its position (same or enclosing block) is replaced by it."""
    stored = {id(n.src[0].src[0]) for n in self.nodes if n.op is Ops.STORE}
    seen: dict[tuple, tuple[Node, tuple]] = {}
    repl: dict[int, Node] = {}
    scope: list[int] = []
    out: list[Node] = []
    for n in self.nodes:
      n.src = [repl.get(id(s), s) for s in n.src]
      if n.op in GroupOp.BlockEnd and scope: scope.pop()
      if n.op in PURE or (n.op is Ops.LOAD and len(n.src) == 1 and id(n.src[0].src[0]) not in stored):
        key = (n.op, n.dtype, _arg_key(n.arg), tuple(id(s) for s in n.src))
        prev = seen.get(key)
        if prev is not None and tuple(scope[:len(prev[1])]) == prev[1]:
          repl[id(n)] = prev[0]
          continue
        seen[key] = (n, tuple(scope))
      out.append(n)
      if n.op in GroupOp.BlockStart: scope.append(id(n))
    self.nodes = out

  def dce(self) -> None:
    """Merges duplicate pure nodes (merge_duplicates), then drops value nodes nothing live reads, accumulators nobody
    reads (with their ASSIGNs), and empty blocks. DEFINE_GLOBALs stay (they are the call signature; the reducer removes
    unused ones separately)."""
    self.merge_duplicates()
    while True:
      live: set[int] = set()
      assigns: dict[int, list[Node]] = {}
      for n in self.nodes:
        if n.op is Ops.ASSIGN: assigns.setdefault(id(n.src[0]), []).append(n)
      work = [n for n in self.nodes if n.op in EFFECTS]
      while work:
        n = work.pop()
        if id(n) in live: continue
        live.add(id(n))
        work.extend(n.src)
        if n.op is Ops.ASSIGN: work.append(n.src[0])
        if n.op is Ops.DEFINE_ACC: work.extend(assigns.get(id(n), ()))
      before = len(self.nodes)
      self.nodes = [n for n in self.nodes if id(n) in live]
      # empty blocks: an opener immediately followed by its closer
      out: list[Node] = []
      for n in self.nodes:
        if n.op in GroupOp.BlockEnd and out and out[-1] is n.src[0] and not self._has_users(n.src[0], exclude=n): out.pop()
        else: out.append(n)
      self.nodes = out
      if len(self.nodes) == before: return

  def _has_users(self, node: Node, exclude: Node) -> bool:
    return any(node in m.src for m in self.nodes if m is not exclude)


def const_node(value, dt: DType) -> list[Node]:
  """The nodes of a constant of dt (a vector dtype: a VECTORIZE of one CONST); the last node is the value."""
  s = dt.scalar()
  v = bool(value) if s == dtypes.bool else int(value) if dtypes.is_int(s) else float(value)
  c = Node(Ops.CONST, s, (), v)
  return [c] if dt.count == 1 else [c, Node(Ops.VECTORIZE, dt, [c] * dt.count)]

"""A case as the reducer edits it: `State`, the program as an editable graph with its inputs by buffer node and its
var values by var node; a copy with the map from old nodes to new (each candidate edits its own copy), and the
candidate Case built back from it (None when its program does not verify).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refimpl.fuzz.case import Case
from refimpl.fuzz.graph import Graph, Node
from refimpl.ir import Ops, ProgramError


@dataclass
class State:
  """A case as an editable graph: inputs by buffer node, var values by var node."""
  graph: Graph
  arrays: dict[int, np.ndarray]
  vars: dict[int, int]

  @staticmethod
  def of(case: Case) -> State:
    g = Graph.from_program(case.program)
    var_nodes = [n for n in g.nodes if n.op is Ops.DEFINE_VAR]
    return State(g, {id(b): a for b, a in zip(g.globals(), case.inputs)}, {id(v): x for v, x in zip(var_nodes, case.vals)})

  def case(self) -> Case | None:
    try: p = self.graph.program()
    except ProgramError: return None
    vals = tuple(self.vars[id(n)] for n in self.graph.nodes if n.op is Ops.DEFINE_VAR)
    return Case(p, [self.arrays[id(b)] for b in self.graph.globals()], vals)

  def copy(self) -> tuple[State, dict[int, Node]]:
    g, m = self.graph.copy()
    return State(g, {id(m[k]): a for k, a in self.arrays.items()}, {id(m[k]): v for k, v in self.vars.items()}), m

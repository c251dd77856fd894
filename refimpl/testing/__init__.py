"""Tools for holding backends to the spec.

  eval.py          eval_op: one ALU op, CAST or BITCAST elementwise over numpy arrays, on any device
  values.py        edge values of every dtype and hypothesis strategies biased to them
  compare.py       comparison by each op's rule (exact / tolerance / allowed set, undefined lanes skipped), reproducers
  differential.py  op-level harnesses (one compiled kernel per device and case) and the sweep inputs
  programs.py      program-level helpers: run on a device and on the emulator, compare exact elements
  pytest_plugin.py --backend, --conformance-report and the `backend` / `conformance` fixtures
"""
from refimpl.testing.eval import eval_op

__all__ = ["eval_op"]

"""Every distinct kernel a tinygrad 0.14 script runs on its PYTHON device, as refimpl cases (refimpl.tinygrad.cases).

  python -m refimpl.tinygrad.v0_14.capture --out DIR -- script.py [args...]

runs the script with DEV=PYTHON, records each kernel as it is launched (its linearized uops as a KernelRecord, the
buffers before and after, the variable values) and saves each distinct translatable one as DIR/<kernel>.json: the
translated program, its inputs, and under "found" what tinygrad computed ("outputs") and the record itself ("record"),
so the importer can be rerun on it without tinygrad 0.14. The kernels refimpl cannot translate are listed, with the
uop and the reason, in DIR/untranslated.json. Exit status: the script's own."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import runpy
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from refimpl.backends.host_memory import copy_of
from refimpl.ir import Program
from refimpl.tinygrad.cases import case_finding, save_case
from refimpl.tinygrad.lines import require
from refimpl.tinygrad.translation import TranslationError
from refimpl.tinygrad.v0_14.importer import translate
from refimpl.tinygrad.v0_14.live import record_of
from refimpl.tinygrad.v0_14.record import SOURCE, to_json


@dataclass
class Captured:
  saved: list[Path] = field(default_factory=list)
  untranslated: dict[str, str] = field(default_factory=dict)  # kernel name -> the TranslationError


def _arrays(bufs, program: Program) -> list[np.ndarray]:
  """Copies of the launch's buffers (raw memoryviews, in DEFINE_GLOBAL order) as numpy arrays of their dtypes."""
  return [copy_of(buf, ptr.base) for buf, ptr in zip(bufs, program.signature)]


@contextlib.contextmanager
def capture(out: Path) -> Iterator[Captured]:
  """While active, every kernel tinygrad 0.14's PYTHON device launches is recorded into `out` (module docstring)."""
  require("0.14.0", "refimpl.tinygrad.v0_14.capture")
  from tinygrad.runtime import ops_python
  got, seen, original = Captured(), set(), ops_python.PythonProgram.__call__
  def call(self, *bufs, global_size=(1, 1, 1), local_size=(1, 1, 1), vals=(), **kw):
    record = record_of(self.uops, global_size, local_size)
    try: t = translate(record)
    except TranslationError as e:
      got.untranslated[record.name] = str(e)
      return original(self, *bufs, global_size=global_size, local_size=local_size, vals=vals, **kw)
    before = _arrays(bufs, t.program)
    ret = original(self, *bufs, global_size=global_size, local_size=local_size, vals=vals, **kw)
    key = (t.program, tuple(a.tobytes() for a in before), tuple(vals))
    if key not in seen:
      seen.add(key)
      f = case_finding(t.program, before, tuple(vals), "PYTHON", record.name, _arrays(bufs, t.program),
                       rules=list(t.fired), source=SOURCE)
      f.found["record"] = to_json(record)
      got.saved.append(save_case(out, f))
    return ret
  ops_python.PythonProgram.__call__ = call
  try: yield got
  finally:
    ops_python.PythonProgram.__call__ = original
    (out / "untranslated.json").write_text(json.dumps(got.untranslated, indent=1, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python -m refimpl.tinygrad.v0_14.capture", description=__doc__.splitlines()[0])
  ap.add_argument("--out", type=Path, required=True, help="where the case files go")
  ap.add_argument("script", nargs=argparse.REMAINDER, help="-- script.py [args...]")
  args = ap.parse_args(argv)
  script = [a for a in args.script if a != "--"] if args.script[:1] == ["--"] else args.script
  if not script: ap.error("no script given")
  if os.environ.setdefault("DEV", "PYTHON") != "PYTHON": ap.error("the capture runs tinygrad's PYTHON device (DEV=PYTHON)")
  args.out.mkdir(parents=True, exist_ok=True)
  sys.argv = script
  status = 0
  with capture(args.out) as got:
    try: runpy.run_path(script[0], run_name="__main__")
    except SystemExit as e: status = e.code if isinstance(e.code, int) else 1
  print(f"{len(set(got.saved))} kernels saved in {args.out}; {len(got.untranslated)} not translatable "
        f"(listed in {args.out / 'untranslated.json'})", file=sys.stderr)
  return status


if __name__ == "__main__":
  sys.exit(main())

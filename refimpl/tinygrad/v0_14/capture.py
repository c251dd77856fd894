"""Every distinct kernel a tinygrad 0.14 script runs on one of its devices (PYTHON, CPU, ...), as refimpl cases
(refimpl.tinygrad.cases).

  python -m refimpl.tinygrad.v0_14.capture [--device PYTHON] --out DIR [--max-elements N] -- script.py [args...]

runs the script with DEV=DEVICE (CPU: with refimpl's clang, refimpl.tinygrad.v0_14.toolchain), records each kernel as
it is launched (runs.py: its linearized uops as a KernelRecord, the buffers before and after, the variable values) and
saves each distinct translatable one as DIR/<kernel>.json: the translated program, its inputs, and under "found" what
tinygrad computed ("outputs") and the record itself ("record"), so the importer can be rerun on it without tinygrad
0.14. The kernels refimpl cannot translate are listed, with the uop and the reason, in DIR/untranslated.json; those
with a buffer of more than --max-elements elements (default 65536, as under 0.10.1) are skipped and listed. Exit
status: the script's own; 2 when the device cannot run here."""
from __future__ import annotations

import argparse
import contextlib
import json
import runpy
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from refimpl.tinygrad.cases import case_finding, save_case
from refimpl.tinygrad.lines import require
from refimpl.tinygrad.v0_14.record import SOURCE, to_json
from refimpl.tinygrad.v0_14.runs import KernelRun, kernel_runs
from refimpl.tinygrad.v0_14.toolchain import use_device

MAX_ELEMENTS = 1 << 16  # the default largest buffer a saved case may have (a case file holds every buffer's bits)


@dataclass
class Captured:
  saved: list[Path] = field(default_factory=list)
  untranslated: dict[str, str] = field(default_factory=dict)  # kernel name -> the TranslationError
  too_large: dict[str, int] = field(default_factory=dict)  # kernel name -> its largest buffer's elements


@contextlib.contextmanager
def capture(out: Path, device: str = "PYTHON", max_elements: int = MAX_ELEMENTS) -> Iterator[Captured]:
  """While active, every kernel tinygrad 0.14 runs is recorded into `out` as a case of `device` (module docstring)."""
  require("0.14.0", "refimpl.tinygrad.v0_14.capture")
  got, seen = Captured(), set()
  def record(r: KernelRun) -> None:
    if r.translation is None:
      got.untranslated[r.record.name] = str(r.error)
      return
    largest = max((a.size for a in r.before), default=0)
    if largest > max_elements:
      got.too_large[r.record.name] = largest
      return
    key = (r.translation.program, tuple(a.tobytes() for a in r.before), r.vals)
    if key in seen: return
    seen.add(key)
    f = case_finding(r.translation.program, r.before, r.vals, device, r.record.name, r.after, rules=list(r.translation.fired),
                     source=SOURCE)
    f.found["record"] = to_json(r.record)
    got.saved.append(save_case(out, f))
  try:
    with kernel_runs(record): yield got
  finally: (out / "untranslated.json").write_text(json.dumps(got.untranslated, indent=1, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python -m refimpl.tinygrad.v0_14.capture", description=__doc__.splitlines()[0])
  ap.add_argument("--device", default="PYTHON", help="tinygrad 0.14's device the script runs on (default PYTHON)")
  ap.add_argument("--out", type=Path, required=True, help="where the case files go")
  ap.add_argument("--max-elements", type=int, default=MAX_ELEMENTS,
                  help=f"skip kernels with a larger buffer (default {MAX_ELEMENTS})")
  ap.add_argument("script", nargs=argparse.REMAINDER, help="-- script.py [args...]")
  args = ap.parse_args(argv)
  script = [a for a in args.script if a != "--"] if args.script[:1] == ["--"] else args.script
  if not script: ap.error("no script given")
  why = use_device(args.device)
  if why is not None:
    print(f"refimpl.tinygrad.v0_14.capture: cannot use tinygrad's {args.device}: {why}", file=sys.stderr)
    return 2
  from tinygrad.device import Device
  device = Device.DEFAULT  # the name it opened by (a porter's module:Class is registered under its own)
  args.out.mkdir(parents=True, exist_ok=True)
  sys.argv = script
  status = 0
  with capture(args.out, device, args.max_elements) as got:
    try: runpy.run_path(script[0], run_name="__main__")
    except SystemExit as e: status = e.code if isinstance(e.code, int) else 1
  print(f"{len(set(got.saved))} kernels saved in {args.out}; {len(got.untranslated)} not translatable "
        f"(listed in {args.out / 'untranslated.json'}); {len(got.too_large)} skipped", file=sys.stderr)
  for name, n in sorted(got.too_large.items()):
    print(f"  skipped {name}: a buffer of {n} elements (more than --max-elements {args.max_elements})", file=sys.stderr)
  return status


if __name__ == "__main__":
  sys.exit(main())

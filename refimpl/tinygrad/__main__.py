"""The tinygrad bridge's command line.

  python -m refimpl.tinygrad capture --device CLANG --out DIR [--max-elements N] -- script.py [args...]
      runs the script on tinygrad's DEVICE and saves every distinct kernel it runs as a refimpl case in DIR (program,
      inputs and tinygrad's outputs as bit patterns, the kernel name): `python -m refimpl.fuzz replay DIR/*.json`
  python -m refimpl.tinygrad run [--check DEVICE] [--out DIR] -- script.py [args...]
      runs the script with every kernel on refimpl's emulator (the REFIMPL device, strict: undefined behaviour stops it
      naming the kernel, the uop and the lane); with --check DEVICE, on tinygrad's DEVICE with each kernel also run on the
      emulator, every disagreement and undefined behaviour saved as a reproducer in DIR

  python -m refimpl.tinygrad report [--out docs/conformance] [--fuzz-seconds 600] [--backends CLANG,LLVM,GPU,WEBGPU]
      the conformance report of tinygrad 0.10.1's backends (refimpl.tinygrad.report.runner): the suite, a fuzz
      campaign and every disagreement class's reproducer on each TINYGRAD:<backend> (a tinygrad device name, or a
      porter's module:Class; QCOM, DSP, NV, CUDA, AMD, METAL at the level refimpl.tinygrad.v0_10.standins judges them);
      writes tinygrad-0.10.1.md / .html / .json; --classes-only reruns only the classes' reproducers over the saved .json;
      --merge reports the named backends into the saved .json, keeping the others
  python -m refimpl.tinygrad selftest [--files test_tiny.py,...] [--devices REFIMPL,CLANG,PYTHON] [--out docs/conformance]
                                      [--tests CHECKOUT]
      tinygrad's own tests (its sdist, fetched into a cache, or a checkout of the installed version) on each device, and
      the compatibility table
      tinygrad-selftest.md / .html, under 0.14 tinygrad-0.14-selftest.* with its defaults (refimpl.tinygrad.selftest)

Under tinygrad 0.14, `run`, `run --check DEVICE` and `capture --device DEVICE` serve it (refimpl.tinygrad.v0_14: its
REFIMPL device, check and capture; DEVICE PYTHON or CPU, whose clang refimpl.tinygrad.v0_14.toolchain provides).

Exit status: the script's own; 1 when the check found disagreements or undefined behaviour; 2 on a usage error.
"""
from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
  ap = argparse.ArgumentParser(prog="python -m refimpl.tinygrad",
                               description="Run tinygrad scripts against refimpl (0.10.1; 0.14: run, run --check, capture).")
  sub = ap.add_subparsers(dest="command", required=True)
  cap = sub.add_parser("capture", help="save every kernel a tinygrad script runs as a refimpl case")
  cap.add_argument("--device", default="PYTHON", help="tinygrad's device to run the script on (default PYTHON)")
  cap.add_argument("--out", type=Path, required=True, help="where the case files go")
  cap.add_argument("--max-elements", type=int, default=1 << 16, help="skip kernels with a larger buffer (default 65536)")
  run = sub.add_parser("run", help="run a tinygrad script on the reference (or check a device against it)")
  run.add_argument("--check", metavar="DEVICE", help="run on tinygrad's DEVICE and compare every kernel with the emulator")
  run.add_argument("--out", type=Path, default=Path("tinygrad-check"), help="where reproducers go (default tinygrad-check/)")
  for p in (cap, run): p.add_argument("script", nargs=argparse.REMAINDER, help="-- script.py [args...]")
  rep = sub.add_parser("report", help="the conformance report of tinygrad's own backends (docs/conformance)")
  rep.add_argument("--out", type=Path, default=Path("docs/conformance"), help="output folder (default docs/conformance)")
  rep.add_argument("--fuzz-seconds", type=float, default=600.0, help="fuzz campaign per backend (default 600)")
  rep.add_argument("--classes-only", action="store_true",
                   help="rerun only the disagreement classes' reproducers over the saved report (tinygrad-0.10.1.json)")
  rep.add_argument("--keep-fuzz", action="store_true",
                   help="keep the saved fuzz campaigns (each published finding replayed again) instead of running new ones")
  rep.add_argument("--pages-only", action="store_true", help="rebuild the pages from the saved data, rerunning nothing")
  rep.add_argument("--merge", action="store_true",
                   help="report the named backends into the saved data, keeping the other backends as they were")
  rep.add_argument("--backends", default="CLANG,LLVM,GPU,WEBGPU",
                   help="comma-separated tinygrad device names or module:Class (default CLANG,LLVM,GPU,WEBGPU)")
  st = sub.add_parser("selftest", help="tinygrad's own tests on REFIMPL and tinygrad's devices: a compatibility table")
  st.add_argument("--files", help="comma-separated test files of tinygrad's test/ (default: the installed line's set, "
                  "refimpl.tinygrad.selftest.default_files)")
  st.add_argument("--devices", help="comma-separated (default REFIMPL,CLANG,PYTHON; under tinygrad 0.14 REFIMPL,CPU,PYTHON)")
  st.add_argument("--out", type=Path, default=Path("docs/conformance"), help="output folder (default docs/conformance)")
  st.add_argument("--timeout", type=float, default=1200, help="seconds per test file and device (default 1200)")
  st.add_argument("--tests", type=Path, metavar="CHECKOUT",
                  help="run the tests of this tinygrad checkout (of the installed version) instead of its sdist's")
  return ap


def selftest_main(args: argparse.Namespace) -> int:
  from refimpl.tinygrad.selftest import CheckoutError, default_devices, default_files, line, page_name, refimpl_only, selftest
  files = [f.strip() for f in args.files.split(",")] if args.files else list(default_files(line(), args.tests is not None))
  devices = [d.strip().upper() for d in args.devices.split(",") if d.strip()] if args.devices else list(default_devices(line()))
  try:
    runs = selftest(files, devices, args.out, log=lambda line: print(line, file=sys.stderr, flush=True), timeout=args.timeout,
                    checkout=args.tests)
  except CheckoutError as e:
    print(f"refimpl.tinygrad selftest: {e}", file=sys.stderr)
    return 2
  print(f"wrote {args.out / (page_name(line()) + '.md')} and .html; {len(refimpl_only(runs))} tests fail on REFIMPL only",
        file=sys.stderr)
  return 0


def _script(args: argparse.Namespace, ap: argparse.ArgumentParser) -> list[str]:
  argv = args.script[1:] if args.script[:1] == ["--"] else args.script
  if not argv: ap.error("give the script after --, e.g. -- train.py --steps 3")
  if not Path(argv[0]).is_file(): ap.error(f"no such script: {argv[0]}")
  return argv


def _run_script(argv: list[str]) -> int:
  """Runs argv[0] as __main__ with sys.argv = argv; returns its exit status (SystemExit honoured)."""
  old = sys.argv
  sys.argv = list(argv)
  sys.path.insert(0, str(Path(argv[0]).resolve().parent))
  try: runpy.run_path(argv[0], run_name="__main__")
  except SystemExit as e: return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
  finally: sys.argv = old
  return 0


def _use_device(device: str) -> str | None:
  """Makes tinygrad's `device` the default (after preparing the pip toolchains); None, or why it cannot be used."""
  if device.split(":")[0].upper() != "PYTHON":  # tinygrad's emulator needs no toolchain
    from refimpl.tinygrad.v0_10.toolchain import prepare_tinygrad
    why = prepare_tinygrad().get(device.split(":")[0].upper())
    if why is not None: return why
  from tinygrad.device import Device
  try: Device.DEFAULT = Device[device].device
  except Exception as e: return f"{device}: {type(e).__name__}: {e}"
  return None


def capture_main(args: argparse.Namespace, argv: list[str]) -> int:
  from refimpl.tinygrad.v0_10.capture import capture
  why = _use_device(args.device)
  if why is not None:
    print(f"refimpl.tinygrad: cannot use tinygrad's {args.device}: {why}", file=sys.stderr)
    return 2
  with capture() as kernels:
    try: status = _run_script(argv)
    finally: _save_captured(args, kernels)
  return status


def _save_captured(args: argparse.Namespace, kernels: list) -> None:
  """Saves what capture recorded (also when the script failed part way), with a summary line and what was skipped."""
  from refimpl.tinygrad.cases import case_finding, save_case
  saved, skipped = 0, []
  for k in kernels:
    if k.program is None:
      skipped.append(f"{k.name}: not translatable: {k.error}")
      continue
    largest = max((a.size for a in k.inputs), default=0)
    if largest > args.max_elements:
      skipped.append(f"{k.name}: a buffer of {largest} elements (more than --max-elements {args.max_elements})")
      continue
    save_case(args.out, case_finding(k.program, k.inputs, k.vals, args.device.upper(), k.name, k.outputs, rules=list(k.fired)))
    saved += 1
  print(f"refimpl.tinygrad capture: {len(kernels)} distinct kernels on {args.device}, {saved} saved in {args.out}, "
        f"{len(skipped)} skipped", file=sys.stderr)
  for s in skipped: print(f"  skipped {s}", file=sys.stderr)


def run_main(args: argparse.Namespace, argv: list[str]) -> int:
  """`run`: on the installed line's REFIMPL device, or with --check on tinygrad's device, each kernel checked on the
  emulator (refimpl.tinygrad.v0_10.reference.check_kernels for 0.10.1, refimpl.tinygrad.v0_14.check for 0.14)."""
  if args.check is None: return run_on_reference(argv)
  from refimpl.tinygrad.lines import installed
  from refimpl.tinygrad.session import Session
  if installed() == "0.14.0":
    from refimpl.tinygrad.v0_14.check import check_kernels as check_014
    from refimpl.tinygrad.v0_14.toolchain import use_device
    why = use_device(args.check)
    checking = check_014(args.out, Session(progress=True))
  else:
    from refimpl.tinygrad.v0_10.reference import check_kernels
    why = _use_device(args.check)
    checking = check_kernels(args.out, args.check.upper(), Session(progress=True))
  if why is not None:
    print(f"refimpl.tinygrad: cannot use tinygrad's {args.check}: {why}", file=sys.stderr)
    return 2
  with checking as session:
    try: status = _run_script(argv)
    finally: print(session.summary(), file=sys.stderr)
  return 1 if session.disagreements or session.undefined else status


def run_on_reference(argv: list[str]) -> int:
  """`run` without --check, under either tinygrad line: the script with the installed line's REFIMPL device as
  tinygrad's default (refimpl.tinygrad.v0_10.reference for 0.10.1, refimpl.tinygrad.v0_14.device for 0.14); the device's
  session prints progress, and the summary at the end."""
  from refimpl.tinygrad.lines import installed
  if installed() == "0.14.0":
    from refimpl.tinygrad.v0_14 import device
    device.install(default=True)
    session = device.device_session()
  else:
    from refimpl.tinygrad.v0_10 import reference
    reference.install_reference_device(default=True)
    session = reference.device_session()
  session.progress = True
  try: status = _run_script(argv)
  finally: print(session.summary(), file=sys.stderr)
  return status


def _line_error(args: argparse.Namespace, script: list[str] | None) -> int | None:
  """Under tinygrad 0.14, `run` (with or without --check) serves both lines, `capture` is refimpl.tinygrad.v0_14's, and
  `selftest` runs 0.14's tests; every other command serves 0.10.1 only: exit status 2 naming the lines
  (refimpl.tinygrad.lines). None when the command runs as it is."""
  from refimpl.tinygrad.lines import UnsupportedTinygrad, installed, require
  if installed() == "0.14.0" and args.command == "capture":
    from refimpl.tinygrad.v0_14.capture import main as capture_014
    return capture_014(["--device", args.device, "--out", str(args.out), "--max-elements", str(args.max_elements), "--",
                        *(script or [])])
  if installed() == "0.14.0" and args.command == "run": return None  # run_main: either line
  if installed() == "0.14.0" and args.command == "selftest": return None  # refimpl.tinygrad.selftest serves both lines
  try: require("0.10.1", f"python -m refimpl.tinygrad {args.command}")
  except UnsupportedTinygrad as e:
    print(f"refimpl.tinygrad: {e}", file=sys.stderr)
    return 2
  return None


def main(argv: list[str] | None = None) -> int:
  ap = _parser()
  args = ap.parse_args(argv)
  script = _script(args, ap) if args.command in ("capture", "run") else None
  refused = _line_error(args, script)
  if refused is not None: return refused
  if args.command == "selftest": return selftest_main(args)
  if args.command == "report":
    from refimpl.tinygrad.report.runner import main as report_main
    from refimpl.tinygrad.report.runner import rebuild_pages, rerun_classes
    given = sys.argv[1:] if argv is None else list(argv)
    command = " ".join(["python -m refimpl.tinygrad", *given])
    if args.pages_only: return rebuild_pages(args.out)
    if args.classes_only: return rerun_classes(args.out, command)
    backends = [b.strip() if ":" in b else b.strip().upper() for b in args.backends.split(",") if b.strip()]
    return report_main(args.out, backends, args.fuzz_seconds, command, keep_fuzz=args.keep_fuzz, merge=args.merge)
  return capture_main(args, script) if args.command == "capture" else run_main(args, script)


if __name__ == "__main__":
  sys.exit(main())

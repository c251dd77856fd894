"""python -m refimpl.conformance: run the packaged conformance suite on backends and write the report.

  python -m refimpl.conformance [--backend NAME|module:Class ...] [--baseline NAME] [--report PATH.html] [--quick]
                                [-n N] [--xfail PATTERN ...] [--xfail-file FILE] [--only PATTERN ...] [--skip PATTERN ...]
                                [-- extra pytest arguments]

Without --backend, every device that opens here is tested (refimpl's own: CLANG, LLVM, GPU, PYTHON). The report is
written as PATH (HTML) and beside it as markdown (default: conformance-report.html); the page names this command, its
commit, date and toolchains, the hypothesis profile, and every known device that did not open here (CUDA without a GPU)
as not tested, with the reason. --quick draws 30 hypothesis examples per property instead of 200 (the `dev` profile),
which makes the run a few minutes on 2 cores. It prints, per backend, how many op cases pass, FAIL, are unsupported or
relaxed.

--baseline NAME judges the backends against the device they derive from (a port of tinygrad's CLANG: --baseline
TINYGRAD:CLANG): every kernel is run on both with the same inputs, and only what differs fails; a failure the baseline
shares on the same lanes is reported "as on the baseline" (refimpl.testing.baseline). The summary counts the
differences.

Exit status: 0 when everything passed (or was declared a known failure with --xfail, or fails as on the baseline); 1
when a test failed; 2 when a named backend or the baseline does not open (a missing module, a compiler that cannot
run) or a named backend had nothing checked (every test deselected or skipped), with the cause; and when pytest or
hypothesis is not installed (pip install 'refimpl[conformance]').
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import NoReturn


def parser() -> argparse.ArgumentParser:
  ap = argparse.ArgumentParser(prog="python -m refimpl.conformance", description=__doc__.split("\n")[0])
  ap.add_argument("--backend", action="append", default=[], help="a device name or module:Class (repeat or comma-separate)")
  ap.add_argument("--baseline", metavar="NAME", help="judge against this device: only differences from it fail")
  ap.add_argument("--report", type=Path, default=Path("conformance-report.html"), help="the HTML report (markdown beside)")
  ap.add_argument("--quick", action="store_true", help="30 hypothesis examples per property instead of 200")
  ap.add_argument("-n", dest="workers", default=None, help="pytest-xdist worker processes (e.g. auto)")
  for name, what in (("--xfail", "known failures"), ("--only", "run only these tests"), ("--skip", "leave these out")):
    ap.add_argument(name, action="append", default=[], metavar="PATTERN", help=f"{what} (fnmatch over test ids)")
  ap.add_argument("--xfail-file", metavar="FILE", help="known failures, one pattern per line")
  ap.add_argument("pytest_args", nargs=argparse.REMAINDER, help="-- then more pytest arguments")
  return ap


def pytest_arguments(args: argparse.Namespace, argv: list[str] | None = None) -> list[str]:
  """The pytest command line that runs the packaged suite as `args` ask; the report names `argv` (this command's
  arguments) as the command that made it."""
  given = sys.argv[1:] if argv is None else argv
  out = ["--pyargs", "refimpl.conformance", "-q", "-p", "no:cacheprovider", "-W", "ignore:Non-empty compiler output",
         "--conformance-report", str(args.report.with_suffix(".md")),
         "--conformance-command", " ".join(["python -m refimpl.conformance", *given])]
  for b in args.backend: out += ["--backend", b]
  if args.baseline: out += ["--baseline", args.baseline]
  for opt in ("xfail", "only", "skip"):
    for pattern in getattr(args, opt): out += [f"--{opt}", pattern]
  if args.xfail_file: out += ["--xfail-file", args.xfail_file]
  if args.workers: out += ["-n", args.workers]
  extra = args.pytest_args[1:] if args.pytest_args[:1] == ["--"] else args.pytest_args
  return out + extra


def _missing_requirements() -> list[str]:
  """The modules the packaged suite runs on (refimpl[conformance]) that do not import here."""
  missing = []
  for name in ("pytest", "hypothesis"):
    try: __import__(name)
    except ImportError: missing.append(name)
  return missing


def main(argv: list[str] | None = None) -> NoReturn:
  """Becomes `python -m pytest` with the packaged suite's arguments (exec: pytest's exit status, Ctrl-C and output are
  the command's own). A fresh interpreter is what lets pytest rewrite the asserts of refimpl's plugin, which this
  process has already imported."""
  args = parser().parse_args(argv)
  missing = _missing_requirements()
  if missing:
    print(f"refimpl.conformance: the suite needs {' and '.join(missing)}: pip install 'refimpl[conformance]'",
          file=sys.stderr)
    sys.exit(2)
  env = {**os.environ, "REFIMPL_HYPOTHESIS_PROFILE": "dev"} if args.quick else dict(os.environ)
  command = [sys.executable, "-m", "pytest", *pytest_arguments(args, argv)]
  sys.stdout.flush()
  sys.stderr.flush()
  os.execve(sys.executable, command, env)


if __name__ == "__main__":
  sys.exit(main())

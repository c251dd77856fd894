"""The render hash: one digest of what every renderer makes of the fuzzer's programs, to prove a refactoring of the
renderers or the lowering passes leaves every rendered text (and every refusal) byte-identical.

  python bench/render_hash.py [--programs N] [--seed S] [--verbose]

Each program i < N of each generation mode (random, tinygrad, corpus; BARRIERs allowed; the renderer's dtypes) is
rendered the way refimpl's runner renders it (refimpl.lower.lower_for, then the renderer's render), by each renderer of
RENDERERS: CLANG, LLVM and OpenCL C under the capability sets a GPU device can report. A rendering is its text, or
the class and message of the error it raised. It prints one SHA-256 per renderer and one over everything; run it before
and after a change. No device is opened and no compiler runs, so it needs no toolchain.
"""
from __future__ import annotations

import argparse
import hashlib
import sys
import warnings

from refimpl.backends.llvmir import LLVMRenderer
from refimpl.backends.opencl import OpenCLRenderer, supported_dtypes
from refimpl.backends.ops_clang import ClangRenderer
from refimpl.fuzz.generate import MODES, make_program
from refimpl.fuzz.grow import ALL_DTYPES, Profile
from refimpl.lower import lower_for

GRID = dict(has_local=True, has_shared=True, global_max=(2**31 - 1, 65535, 65535), local_max=(1024, 1024, 1024))
RENDERERS = {
  "CLANG": ClangRenderer("CLANG"),
  "LLVM": LLVMRenderer(),
  "GPU": OpenCLRenderer("GPU", **GRID, supported_dtypes=supported_dtypes(True)),
  "GPU-libm-decomposed": OpenCLRenderer("GPU", **GRID, supported_dtypes=supported_dtypes(True), native_transcendentals=False),
  "GPU-no-fp64": OpenCLRenderer("GPU", **GRID, supported_dtypes=supported_dtypes(False), has_fp64=False),
  "GPU-fp16": OpenCLRenderer("GPU", **GRID, supported_dtypes=supported_dtypes(True), has_fp16=True),
  "GPU-small-workgroup": OpenCLRenderer("GPU", **GRID, supported_dtypes=supported_dtypes(True), max_workgroup_size=4,
                                        local_memory_bytes=64),
}


def rendering(renderer, program) -> str:
  """What `renderer` makes of `program` as the runner hands it over: the text, or the error's class and message."""
  try:
    return renderer.render(program.name, lower_for(program, renderer))
  except Exception as e:  # a refusal is part of the renderer's behaviour: hashed like a text
    return f"!{type(e).__name__}: {e}"


def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--programs", type=int, default=400, help="programs per generation mode (default 400)")
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--verbose", action="store_true", help="print each program's digest per renderer")
  args = ap.parse_args(argv)
  warnings.simplefilter("ignore")
  digests = {name: hashlib.sha256() for name in RENDERERS}
  counts = {name: [0, 0] for name in RENDERERS}  # texts, refusals
  programs: dict[tuple, list] = {}  # the programs of each dtype set (a renderer gets those of the dtypes it supports)
  for name, renderer in RENDERERS.items():
    dts = tuple(dt for dt in ALL_DTYPES if renderer.supported_dtypes is None or dt in renderer.supported_dtypes)
    if dts not in programs:
      programs[dts] = [(mode, i, make_program(args.seed, i, Profile(dts, barrier=True, mode=mode)).program)
                       for mode in MODES for i in range(args.programs)]
    for mode, i, program in programs[dts]:
      text = rendering(renderer, program)
      digests[name].update(text.encode() + b"\0")
      counts[name][text.startswith("!")] += 1
      if args.verbose: print(mode, i, name, hashlib.sha256(text.encode()).hexdigest()[:12])
  whole = hashlib.sha256()
  for name, d in digests.items():
    whole.update(d.digest())
    print(f"{name:<22} {d.hexdigest()[:16]}  {counts[name][0]} texts, {counts[name][1]} refusals")
  print(f"{'all':<22} {whole.hexdigest()}")
  return 0


if __name__ == "__main__":
  sys.exit(main())

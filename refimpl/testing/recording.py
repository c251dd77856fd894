"""The programs a suite launches, collected without a GPU: RECORDING, the emulator with a compiler that writes down every
program it is given.

A backend that cannot launch here (CUDA without a driver, tinygrad's CUDA and PTX renderers) can still be held to
every kernel the conformance suite would launch on it: run the suite on RECORDING (`--backend
refimpl.testing.recording:RecordingDevice`, env REFIMPL_RECORD naming the output file), which computes every result with
the emulator (the tests pass and go on to their next program, as on a correct backend), then render and compile what
was recorded for the other backend. The emulator runs every valid program, so the recording is a superset of what a
device with fewer capabilities (dtypes, local sizes) would be given; lower_for refuses the rest for that device.

The file holds one program per line, as the JSON of refimpl.ir.program_to_json (appended, so xdist workers may share
it; each line is written whole by one os.write on an O_APPEND file).
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

from refimpl.backends.ops_python import PythonDevice
from refimpl.device import Compiler
from refimpl.ir import Program, program_from_json

ENV = "REFIMPL_RECORD"


class RecordingCompiler(Compiler):
  """The PYTHON device's identity compiler (the program's JSON is its binary) that also appends each program to the
  file env REFIMPL_RECORD names."""
  def __init__(self, path: str):
    super().__init__(None)
    self.path = path

  def compile(self, src: str) -> bytes:
    line = (json.dumps(json.loads(src), separators=(",", ":")) + "\n").encode()
    fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try: os.write(fd, line)
    finally: os.close(fd)
    return src.encode()


class RecordingDevice(PythonDevice):
  """RECORDING: the emulator (PythonDevice) whose compiler records every program; needs env REFIMPL_RECORD."""
  device_name = "RECORDING"
  def __init__(self, device: str = "RECORDING"):
    super().__init__(device)
    path = os.environ.get(ENV)
    if not path: raise RuntimeError(f"{device}: set env {ENV} to the file the programs are recorded in")
    self.compiler = RecordingCompiler(path)


def recorded(path: str | Path) -> Iterator[Program]:
  """The programs of a recording, in launch order, each distinct one once."""
  seen: set[str] = set()
  for line in Path(path).read_text().splitlines():
    if line and line not in seen:
      seen.add(line)
      yield program_from_json(line)

"""tinygrad 0.14's classes of the REFIMPL device (device.py says what it does). Importable by name, as tinygrad 0.14's
compile workers unpickle the renderer; imports tinygrad 0.14."""
from __future__ import annotations

import json

from tinygrad.device import Compiled, Compiler
from tinygrad.runtime.ops_python import PythonAllocator, PythonRenderer

from refimpl.tinygrad.session import Session
from refimpl.tinygrad.v0_14.live import record_of
from refimpl.tinygrad.v0_14.program import ReferenceProgram
from refimpl.tinygrad.v0_14.record import from_json, to_json


class RecordCompiler(Compiler):
  """Nothing to compile or cache: the "binary" is the record's JSON, encoded."""
  def __init__(self): super().__init__(None)


class ReferenceRenderer(PythonRenderer):
  """tinygrad's PYTHON renderer's capabilities (the kernels 0.14's emulator gets); renders a kernel as its KernelRecord."""
  compiler = RecordCompiler()
  def render(self, uops: list) -> str: return json.dumps(to_json(record_of(uops)))


class RefimplProgram(ReferenceProgram):
  """tinygrad 0.14's runtime: the record the compiler encoded, a program of the device's session."""
  def __init__(self, dev, obj): super().__init__(from_json(json.loads(obj.lib)), dev.session)


class RefimplDevice(Compiled):
  """Every REFIMPL device (REFIMPL, REFIMPL:1, ...) shares the class's session."""
  session = Session()

  def __init__(self, device: str):
    super().__init__(device, PythonAllocator(self), [ReferenceRenderer], RefimplProgram)

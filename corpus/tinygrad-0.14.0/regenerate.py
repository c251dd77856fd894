"""Regenerates the tinygrad 0.14 real-kernel corpus: runs workload.py under `python -m refimpl.tinygrad.v0_14.capture` on
tinygrad 0.14's PYTHON device into PYTHON/ beside this file (and untranslated.json: the kernels refimpl cannot
translate yet, with the uop and the reason). Run it with a Python that has tinygrad 0.14.0 installed
(refimpl's tinygrad 0.10.1 environment cannot):

  python3.11 -m venv /tmp/tg14 && /tmp/tg14/bin/pip install tinygrad==0.14.0 -e .
  /tmp/tg14/bin/python corpus/tinygrad-0.14.0/regenerate.py"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
  from refimpl.tinygrad.lines import UnsupportedTinygrad, require
  try: require("0.14.0", "corpus/tinygrad-0.14.0/regenerate.py")
  except UnsupportedTinygrad as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  out, tmp = HERE / "PYTHON", HERE / ".PYTHON.new"
  shutil.rmtree(tmp, ignore_errors=True)
  env = {**os.environ, "DEV": "PYTHON", "PARALLEL": "0"}
  cmd = [sys.executable, "-m", "refimpl.tinygrad.v0_14.capture", "--out", str(tmp), "--", str(HERE / "workload.py")]
  status = subprocess.run(cmd, check=False, env=env).returncode
  if status != 0 or not tmp.is_dir():
    print(f"capture failed (exit status {status}); {out} left as it was", file=sys.stderr)
    shutil.rmtree(tmp, ignore_errors=True)
    return 1
  shutil.rmtree(out, ignore_errors=True)
  tmp.rename(out)
  (out / "untranslated.json").replace(HERE / "untranslated.json")  # the kernels refimpl cannot translate, and why
  print(f"{len(list(out.glob('*.json')))} kernels in {out}; the untranslatable ones in {HERE / 'untranslated.json'}")
  return 0


if __name__ == "__main__":
  sys.exit(main())

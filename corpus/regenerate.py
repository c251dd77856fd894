"""Regenerates the real-kernel corpus of the installed tinygrad line: runs workload.py under
`python -m refimpl.tinygrad capture` on each of the line's devices (a fresh process each) into tinygrad-<line>/<DEVICE>/:

  tinygrad 0.10.1   CLANG, GPU, PYTHON   (refimpl's own environment)
  tinygrad 0.14.0   CL, CPU, PYTHON      (a second one: python3.11 -m venv .venv14 && .venv14/bin/pip install
                                          tinygrad==0.14.0 -e '.[clang,gpu]' && .venv14/bin/python corpus/regenerate.py;
                                          refimpl.tinygrad.v0_14.toolchain: CPU's clang, CL's OpenCL loader and PoCL)

  python corpus/regenerate.py [DEVICE ...]

A device that cannot run here (no toolchain) is reported and its folder left as it is. The kernels refimpl cannot
translate are listed, where the line's capture says, in tinygrad-<line>/untranslated.json, per device:
{"CPU": {kernel: why}, ...}."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEVICES = {"0.10.1": ("CLANG", "GPU", "PYTHON"), "0.14.0": ("CL", "CPU", "PYTHON")}


def regenerate(line: str, device: str) -> int:
  folder = HERE / f"tinygrad-{line}"
  out, tmp = folder / device, folder / f".{device}.new"
  shutil.rmtree(tmp, ignore_errors=True)
  cmd = [sys.executable, "-m", "refimpl.tinygrad", "capture", "--device", device, "--out", str(tmp), "--",
         str(HERE / "workload.py")]
  status = subprocess.run(cmd, check=False, env={**os.environ, "PARALLEL": "0"}).returncode
  if status != 0 or not tmp.is_dir():
    print(f"{device}: capture failed (exit status {status}); {out} left as it was", file=sys.stderr)
    shutil.rmtree(tmp, ignore_errors=True)
    return 1
  shutil.rmtree(out, ignore_errors=True)
  tmp.rename(out)
  listed = out / "untranslated.json"
  if listed.exists():  # the case files' folder holds cases only: the list goes beside it, under the device's name
    merged = folder / "untranslated.json"
    lists = json.loads(merged.read_text()) if merged.exists() else {}
    lists[device] = json.loads(listed.read_text())
    merged.write_text(json.dumps(lists, indent=1, sort_keys=True) + "\n")
    listed.unlink()
  print(f"{device}: {len(list(out.glob('*.json')))} kernels in {out}")
  return 0


def main(devices: list[str]) -> int:
  from refimpl.tinygrad.lines import installed
  line = installed()
  if line not in DEVICES:
    print(f"error: the corpora are of tinygrad {' and '.join(DEVICES)}; installed: {line}", file=sys.stderr)
    return 2
  return max(regenerate(line, d.upper()) for d in (devices or DEVICES[line]))


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))

"""Regenerates the real-kernel corpus: runs workload.py under `python -m refimpl.tinygrad capture` on each of tinygrad's
CLANG, GPU and PYTHON devices (a fresh process each) into CLANG/, GPU/ and PYTHON/ beside this file.

  python corpus/tinygrad-0.10.1/regenerate.py [DEVICE ...]

A device that cannot run here (no toolchain) is reported and its folder left as it is."""
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEVICES = ("CLANG", "GPU", "PYTHON")


def regenerate(device: str) -> int:
  out = HERE / device
  tmp = HERE / f".{device}.new"
  shutil.rmtree(tmp, ignore_errors=True)
  cmd = [sys.executable, "-m", "refimpl.tinygrad", "capture", "--device", device, "--out", str(tmp), "--",
         str(HERE / "workload.py")]
  status = subprocess.run(cmd, check=False).returncode
  if status != 0 or not tmp.is_dir():
    print(f"{device}: capture failed (exit status {status}); {out} left as it was", file=sys.stderr)
    shutil.rmtree(tmp, ignore_errors=True)
    return 1
  shutil.rmtree(out, ignore_errors=True)
  tmp.rename(out)
  print(f"{device}: {len(list(out.glob('*.json')))} kernels in {out}")
  return 0


if __name__ == "__main__":
  sys.exit(max(regenerate(d.upper()) for d in (sys.argv[1:] or DEVICES)))

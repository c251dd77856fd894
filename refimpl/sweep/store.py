"""The sweep directory: a manifest (sweep.json) and one JSON file per finished chunk, DIR/<case id>/<start>.json.

A chunk file is written whole to a temporary file, fsynced and renamed into place, so it is either absent or
complete: a sweep killed at any moment loses at most the chunks it was computing. Its content:
  {"case", "start", "count", "reference_s", "finished" (unix time), "wall_s" (the chunk's time in its worker),
   "backends": {name: record (refimpl.sweep.chunk)}}
A backend's record is added to an existing file (same rename), so a later sweep with more backends runs only theirs.
The manifest holds the chunk size: a sweep into a directory made with another size is refused. A temporary file whose
writer is gone (a sweep killed mid-write) is removed when a sweep opens the directory again.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

MANIFEST = "sweep.json"

class StoreError(Exception):
  """A sweep directory that cannot be used as asked (another chunk size, an unreadable manifest)."""

class CorruptChunk(Exception):
  """A chunk file that does not read back as a chunk (the path and why)."""

def write_json(path: Path, data: dict) -> None:
  """Writes `data` to `path` atomically (a temporary file beside it, fsynced, then renamed over it)."""
  tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
  with open(tmp, "w") as f:
    json.dump(data, f, sort_keys=True)
    f.flush()
    os.fsync(f.fileno())
  os.replace(tmp, path)

def open_dir(out: Path, chunk_bits: int) -> None:
  """Creates (or checks) the sweep directory `out` for chunks of 2^chunk_bits inputs; removes the temporary files of
  writers that are gone."""
  out.mkdir(parents=True, exist_ok=True)
  remove_orphans(out)
  manifest = out / MANIFEST
  if manifest.exists():
    have = read_manifest(out)
    if have.get("chunk_bits") != chunk_bits:
      raise StoreError(f"{manifest}: this sweep has chunks of 2^{have.get('chunk_bits')} inputs, not 2^{chunk_bits} "
                       "(give the same --chunk-bits, or another --out)")
  else: write_json(manifest, {"chunk_bits": chunk_bits})

def remove_orphans(out: Path) -> list[Path]:
  """Removes the temporary files (write_json's .NAME.PID.tmp) in `out` and its case folders whose writing process no
  longer exists on this machine; returns them. Only a sweep's main process writes, on the machine that holds `out`."""
  gone = []
  for tmp in [*out.glob(".*.tmp"), *out.glob("*/.*.tmp")]:
    pid = tmp.name.rsplit(".", 2)[-2]
    if pid.isdigit() and not _alive(int(pid)):
      tmp.unlink(missing_ok=True)
      gone.append(tmp)
  return gone

def _alive(pid: int) -> bool:
  try: os.kill(pid, 0)
  except ProcessLookupError: return False
  except (PermissionError, OverflowError): return True  # another user's process, or not a pid: leave its files
  return True

def read_manifest(out: Path) -> dict:
  path = out / MANIFEST
  try: data = json.loads(path.read_text())
  except FileNotFoundError: raise StoreError(f"{out} is not a sweep directory (no {MANIFEST})") from None
  except (OSError, ValueError) as e: raise StoreError(f"{path}: unreadable manifest: {e}") from None
  if not isinstance(data, dict) or not isinstance(data.get("chunk_bits"), int):
    raise StoreError(f"{path}: not a sweep manifest (no integer chunk_bits)")
  return data

def chunk_path(out: Path, case: str, start: int) -> Path: return out / case / f"{start:08x}.json"

def read_chunk(path: Path) -> dict:
  """A chunk file's content, or CorruptChunk naming the file and what is wrong with it."""
  try: data = json.loads(path.read_text())
  except (OSError, UnicodeDecodeError, ValueError) as e: raise CorruptChunk(f"{path}: not a readable chunk file: {e}") from None
  if not isinstance(data, dict) or not isinstance(data.get("backends"), dict) or not isinstance(data.get("start"), int):
    raise CorruptChunk(f"{path}: not a chunk file (no start or backends)")
  if chunk_path(path.parent.parent, path.parent.name, data["start"]) != path:
    raise CorruptChunk(f"{path}: holds the chunk at {data['start']:#x} of another file")
  return data

def chunk_files(out: Path) -> dict[str, list[Path]]:
  """Case id -> its chunk files (temporary files of an interrupted write are not chunk files)."""
  return {d.name: sorted(d.glob("[0-9a-f]*.json")) for d in sorted(out.iterdir()) if d.is_dir()}

def save_chunk(out: Path, case: str, start: int, count: int, result: dict, finished: float) -> None:
  """Adds the backends' records of `result` (refimpl.sweep.chunk.run_chunk) to the chunk's file, atomically."""
  path = chunk_path(out, case, start)
  path.parent.mkdir(exist_ok=True)
  try: old = read_chunk(path) if path.exists() else {}
  except CorruptChunk: old = {}
  data = {"case": case, "start": start, "count": count, "finished": round(finished, 3),
          **{k: v for k, v in result.items() if k != "backends"}, "backends": {**old.get("backends", {}), **result["backends"]}}
  write_json(path, data)

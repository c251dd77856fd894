"""Small utilities shared by every part of refimpl: environment flags, sequence helpers, raw memory views, the disk cache."""
from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import pathlib
import struct
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

# *** environment ***

def getenv(key: str, default: Any = 0) -> Any:
  """The environment variable `key` converted to the type of `default` (read fresh each call, so tests can change it)."""
  return type(default)(os.environ.get(key, default))

OSX, LINUX = os.uname().sysname == "Darwin", os.uname().sysname == "Linux"

@contextlib.contextmanager
def env_override(**values: Any) -> Iterator[None]:
  """Sets environment variables for the duration of a `with` block (None removes one), restoring them afterwards."""
  saved = {k: os.environ.get(k) for k in values}
  try:
    for k, v in values.items():
      if v is None: os.environ.pop(k, None)
      else: os.environ[k] = str(v)
    yield
  finally:
    for k, v in saved.items():
      if v is None: os.environ.pop(k, None)
      else: os.environ[k] = v

# *** sequences ***

def prod(xs: Iterable[Any], start: Any = 1) -> Any:
  return functools.reduce(lambda a, b: a * b, xs, start)
def dedup(xs: Iterable[T]) -> list[T]: return list(dict.fromkeys(xs))
def all_same(xs: Sequence[Any]) -> bool: return all(x == xs[0] for x in xs)
def flatten(xss: Iterable[Iterable[T]]) -> list[T]: return [x for xs in xss for x in xs]
def round_up(n: int, multiple: int) -> int: return -(-n // multiple) * multiple
def argfix(*x: Any) -> tuple:
  """Accepts f(1, 2) and f((1, 2)) alike."""
  return tuple(x[0]) if len(x) == 1 and isinstance(x[0], (tuple, list)) else tuple(x)

# *** raw memory ***

def mv_address(mv: memoryview) -> int:
  """The address of a writable contiguous memoryview's first byte."""
  return ctypes.addressof(ctypes.c_char.from_buffer(mv))
def to_mv(ptr: int, size: int) -> memoryview:
  """A writable byte view of `size` bytes at address `ptr`."""
  return memoryview((ctypes.c_uint8 * size).from_address(ptr)).cast("B")
def from_mv(mv: memoryview) -> ctypes.Array:
  """A ctypes byte array sharing memory with a writable memoryview."""
  return (ctypes.c_char * len(mv)).from_buffer(mv)
def flat_mv(mv: memoryview) -> memoryview:
  """Any contiguous memoryview as a flat view of bytes."""
  return mv if mv.nbytes == 0 else mv.cast("B", shape=(mv.nbytes,))

# *** disk cache ***
# One file per entry, named by the sha256 of (table, key). An entry is MAGIC, the payload length, the payload's sha256 and the
# payload; it is written to a temporary file and renamed into place, so readers see a whole entry or none. An entry that is
# truncated or whose hash does not match is deleted and reported as a miss, so the caller rebuilds it: never executed.

CACHE_MAGIC = b"REFIMPL-CACHE-1\n"
_HEADER = struct.Struct("<Q32s")

def cache_dir() -> pathlib.Path:
  """Where compiled artifacts are cached: $REFIMPL_CACHE_DIR, else $XDG_CACHE_HOME/refimpl, else ~/.cache/refimpl."""
  if explicit := os.environ.get("REFIMPL_CACHE_DIR"): return pathlib.Path(explicit)
  return pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache")) / "refimpl"

def _entry_path(table: str, key: str | bytes) -> pathlib.Path:
  raw = key if isinstance(key, bytes) else key.encode()
  return cache_dir() / table / hashlib.sha256(table.encode() + b"\0" + raw).hexdigest()

def diskcache_get(table: str, key: str | bytes) -> bytes | None:
  """The cached payload for (table, key), or None on a miss or when the entry is damaged (which is then removed)."""
  if getenv("CACHELEVEL", 1) == 0: return None
  path = _entry_path(table, key)
  try: data = path.read_bytes()
  except OSError: return None
  header_end = len(CACHE_MAGIC) + _HEADER.size
  if data[:len(CACHE_MAGIC)] == CACHE_MAGIC and len(data) >= header_end:
    length, digest = _HEADER.unpack_from(data, len(CACHE_MAGIC))
    payload = data[header_end:]
    if len(payload) == length and hashlib.sha256(payload).digest() == digest: return payload
  with contextlib.suppress(OSError): path.unlink()
  return None

def diskcache_put(table: str, key: str | bytes, payload: bytes) -> bytes:
  """Stores payload for (table, key) atomically (write a temporary file, then rename). Returns payload."""
  if getenv("CACHELEVEL", 1) == 0: return payload
  path = _entry_path(table, key)
  path.parent.mkdir(parents=True, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
  try:
    with os.fdopen(fd, "wb") as f:
      f.write(CACHE_MAGIC + _HEADER.pack(len(payload), hashlib.sha256(payload).digest()) + payload)
    os.replace(tmp, path)
  except BaseException:
    with contextlib.suppress(OSError): os.unlink(tmp)
    raise
  return payload

# *** counters ***

class GlobalCounters:
  """Process-wide counters: bytes held by allocated buffers, kernels launched and their measured time."""
  mem_used: int = 0
  kernel_count: int = 0
  time_sum_s: float = 0.0

  @staticmethod
  def reset() -> None: GlobalCounters.kernel_count, GlobalCounters.time_sum_s = 0, 0.0

"""A long run's progress on stderr (a fuzz campaign's, a sweep's): tqdm when it is installed, else one status line
(rewritten in place on a terminal, every 10 s otherwise), and messages between the updates."""
from __future__ import annotations

import sys
import time


class Progress:
  """tqdm when it is installed, else one status line on stderr (rewritten in place on a terminal, every 10 s otherwise).
  `total`: the units of work (None: open-ended), `done`: those already done before this run."""
  def __init__(self, quiet: bool, total: int | None, unit: str = "prog", done: int = 0):
    self.quiet, self.last, self.tty = quiet, 0.0, sys.stderr.isatty()
    self.bar = None
    if not quiet:
      try:
        from tqdm import tqdm  # optional: not a dependency
        self.bar = tqdm(total=total, initial=done, unit=unit, file=sys.stderr, dynamic_ncols=True)
      except ImportError: pass
    self.shown = done

  def update(self, done: int, text: str) -> None:
    """`done` units so far; `text` the status line (tqdm's postfix)."""
    if self.quiet: return
    if self.bar is not None:
      self.bar.update(done - self.shown)
      self.shown = done
      self.bar.set_postfix_str(text, refresh=False)
      return
    now = time.perf_counter()
    if now - self.last < (0.25 if self.tty else 10.0): return
    self.last = now
    sys.stderr.write(f"\r\x1b[K{text}" if self.tty else f"{text}\n")
    sys.stderr.flush()

  def message(self, text: str) -> None:
    if self.quiet: return
    if self.bar is not None: self.bar.write(text, file=sys.stderr)
    else: sys.stderr.write(("\r\x1b[K" if self.tty else "") + text + "\n")

  def close(self) -> None:
    if self.bar is not None: self.bar.close()
    elif not self.quiet and self.tty: sys.stderr.write("\r\x1b[K")

"""The HTML of the conformance reports (the per-run report of the pytest plugin and the published tinygrad report,
refimpl.tinygrad.conformance_report): one stylesheet, and the op x dtype grid of one backend.

A case id is the op suite's: "ADD-f32" (an ALU op on a dtype), "CAST-f32-to-i32" or "BITCAST-f32-to-u32" (a
conversion). `grids` lays one backend's cases out as three tables: ALU ops as rows and operand dtypes as columns, then
CAST and BITCAST with the source dtype as rows and the target as columns. Each cell is coloured by its status (pass,
FAIL, unsupported, relaxed, as baseline: a failure the device shares with its --baseline, not tested: a program refimpl
cannot export to the device); a FAIL or relaxed cell links to its reproducer. A cell with no case (an op the spec does not
define on that dtype) is blank.
"""
from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser

from refimpl import spec

STATUSES = ("pass", "fail", "unsupported", "relaxed", "baseline", "untested")
LABELS = {"pass": "pass", "fail": "FAIL", "unsupported": "n/a", "relaxed": "relaxed", "baseline": "as baseline",
          "untested": "not tested"}
CONVERSIONS = ("CAST", "BITCAST")
DTYPE_ORDER = [spec.short_name(d) for d in spec.VALUE_DTYPES]

CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em 2em; color: #222; max-width: 1500px; }
h1 { margin-bottom: .2em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ddd; padding-bottom: .2em; }
table { border-collapse: collapse; margin: .6em 0 1em; } th, td { padding: 3px 9px; border: 1px solid #ddd; text-align: left;
  vertical-align: top; }
thead th { background: #f4f4f4; }
table.grid td, table.grid th { padding: 2px 6px; font: 12px ui-monospace, monospace; text-align: center; }
table.grid tbody th { text-align: left; background: #fafafa; }
td.pass { background: #dff3e3; color: #1d6b33; } td.fail { background: #f9d3d3; color: #9b1c1c; font-weight: bold; }
td.unsupported { background: #eee; color: #888; } td.relaxed { background: #fdf0c8; color: #7a5b00; }
td.none { background: #fff; } td.zero { color: #aaa; }
td.baseline { background: #e6e0f3; color: #4b3b7a; } td.untested { background: #fff; color: #888; border-style: dashed; }
td.pass, td.fail, td.unsupported, td.relaxed, td.baseline, td.untested { white-space: nowrap; }
th.pass { color: #1d6b33; } th.fail { color: #9b1c1c; } th.unsupported { color: #777; } th.relaxed { color: #7a5b00; }
th.baseline { color: #4b3b7a; } th.untested { color: #888; }
td a { color: inherit; } pre { background: #f7f7f7; padding: 8px; white-space: pre-wrap; font-size: 12px; margin: .3em 0; }
code { background: #f3f3f3; padding: 0 3px; } .muted { color: #666; } .legend span { padding: 1px 8px; margin-right: 6px; }
details { margin: .4em 0; } summary { cursor: pointer; }
"""


def esc(x: object) -> str: return html.escape(str(x))


def case_parts(case: str) -> tuple[str, str, str | None]:
  """"ADD-f32" -> ("ADD", "f32", None); "CAST-f32-to-i32" -> ("CAST", "f32", "i32")."""
  op, _, dts = case.partition("-")
  src, sep, dst = dts.partition("-to-")
  return op, src, dst if sep else None


def _order(names: set[str]) -> list[str]:
  """Dtype short names in the spec's order (unknown ones last, sorted)."""
  return [d for d in DTYPE_ORDER if d in names] + sorted(names - set(DTYPE_ORDER))


def _cell(status: str | None, title: str, link: str | None) -> str:
  if status is None: return "<td class=none></td>"
  label = LABELS.get(status, status)
  body = f"<a href='{esc(link)}'>{label}</a>" if link and status in ("fail", "relaxed") else label
  return f"<td class='{esc(status)}' title='{esc(title)}: {esc(status)}'>{body}</td>"


def _table(caption: str, rows: list[str], cols: list[str], at: Callable[[str, str], str | None],
           link: Callable[[str, str], str | None], title: Callable[[str, str], str]) -> str:
  head = "".join(f"<th>{esc(c)}</th>" for c in cols)
  body = "".join(f"<tr><th>{esc(r)}</th>{''.join(_cell(at(r, c), title(r, c), link(r, c)) for c in cols)}</tr>" for r in rows)
  return (f"<table class=grid><caption class=muted>{esc(caption)}</caption><thead><tr><th></th>{head}</tr></thead>"
          f"<tbody>{body}</tbody></table>")


def grids(statuses: dict[str, str], link: Callable[[str], str | None]) -> str:
  """One backend's cases ({case id: status}) as the op x dtype grid and the CAST / BITCAST grids (module docstring);
  `link(case)` is where a FAIL or relaxed cell points."""
  alu = {c: case_parts(c) for c in statuses if case_parts(c)[0] not in CONVERSIONS}
  out = []
  if alu:
    ops = sorted({op for op, _, _ in alu.values()})
    cols = _order({dt for _, dt, _ in alu.values()})
    key = {(op, dt): c for c, (op, dt, _) in alu.items()}
    out.append(_table("ALU ops (rows) on operand dtypes (columns)", ops, cols, lambda r, c: statuses.get(key.get((r, c), "")),
                      lambda r, c: link(key[(r, c)]) if (r, c) in key else None, lambda r, c: f"{r}-{c}"))
  for conv in CONVERSIONS:
    cases = {c: case_parts(c) for c in statuses if case_parts(c)[0] == conv}
    if not cases: continue
    key = {(src, dst): c for c, (_, src, dst) in cases.items()}
    rows, cols = _order({s for s, _ in key}), _order({d for _, d in key})
    out.append(_table(f"{conv} from (rows) to (columns)", rows, cols, lambda r, c, k=key: statuses.get(k.get((r, c), "")),
                      lambda r, c, k=key: link(k[(r, c)]) if (r, c) in k else None, lambda r, c, v=conv: f"{v}-{r}-to-{c}"))
  return "\n".join(out)


MEANING = {"pass": "agrees with the spec on every lane checked", "fail": "breaks the spec (links to its reproducer)",
           "unsupported": "a dtype the device declares unsupported", "relaxed": "an op the device declares inexact",
           "baseline": "fails exactly as on the --baseline device (not this device's failure)",
           "untested": "refimpl cannot export the case to the device (refimpl's limit, not the device's failure)"}


def legend(shown: tuple[str, ...] = STATUSES[:4]) -> str:
  """The colours of the grid cells (those of `shown`), as a one-row table."""
  cells = "".join(f"<td class='{s}'>{LABELS[s]}</td><td class=none>{MEANING[s]}</td>" for s in shown)
  return f"<table class=grid><tr>{cells}</tr></table>"


def page(title: str, body: str) -> str:
  """A self-contained HTML page."""
  return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{esc(title)}</title><style>{CSS}</style></head>"
          f"<body>\n{body}\n</body></html>\n")


# ***** reading a page back (the tests of both reports) *****

@dataclass
class Cell:
  tag: str           # th or td
  cls: str           # its class attribute
  text: str
  href: str | None   # the link inside it, if any


@dataclass
class Table:
  caption: str = ""
  rows: list[list[Cell]] = field(default_factory=list)

  def grid(self) -> dict[tuple[str, str], Cell]:
    """(row header, column header) -> cell, for a table whose first row and first column are headers."""
    head = [c.text for c in self.rows[0]]
    return {(r[0].text, head[k]): c for r in self.rows[1:] for k, c in enumerate(r) if k > 0}


class TableParser(HTMLParser):
  """Every <table> of a page (html.parser), with each cell's tag, class, text and link; and every element id."""
  def __init__(self) -> None:
    super().__init__()
    self.tables: list[Table] = []
    self.ids: set[str] = set()
    self._open: list[Table] = []
    self._cell: Cell | None = None
    self._caption = False

  def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
    a = dict(attrs)
    if a.get("id"): self.ids.add(a["id"] or "")
    if tag == "table": self._open.append(Table())
    elif tag == "caption": self._caption = True
    elif tag == "tr" and self._open: self._open[-1].rows.append([])
    elif tag in ("td", "th") and self._open and self._open[-1].rows:
      self._cell = Cell(tag, a.get("class") or "", "", None)
      self._open[-1].rows[-1].append(self._cell)
    elif tag == "a" and self._cell is not None: self._cell.href = a.get("href")

  def handle_endtag(self, tag: str) -> None:
    if tag == "table" and self._open: self.tables.append(self._open.pop())
    elif tag == "caption": self._caption = False
    elif tag in ("td", "th"): self._cell = None

  def handle_data(self, data: str) -> None:
    if self._caption and self._open: self._open[-1].caption += data
    elif self._cell is not None: self._cell.text = (self._cell.text + data).strip()


def parse_page(text: str) -> TableParser:
  """The tables and ids of an HTML page."""
  p = TableParser()
  p.feed(text)
  p.close()
  return p

"""The HTML of the conformance reports (the per-run report of the pytest plugin and the published tinygrad report,
refimpl.tinygrad.report.runner): one stylesheet, and the op x dtype grid of one backend.

A case id is the op suite's: "ADD-f32" (an ALU op on a dtype), "CAST-f32-to-i32" or "BITCAST-f32-to-u32" (a
conversion). `grids` lays one backend's cases out as three tables: ALU ops as rows and operand dtypes as columns, then
CAST and BITCAST with the source dtype as rows and the target as columns. Each cell is coloured by its status (pass,
FAIL, unsupported, relaxed, as baseline: a failure the device shares with its --baseline, not tested: a program refimpl
cannot export to the device); a FAIL or relaxed cell links to its reproducer. A cell with no case (an op the spec does not
define on that dtype) is blank.

A FAIL cell also names its kind (`failure_kind`, from the case's message): a wrong value, a kernel that does not
render (the device's renderer refuses it), one that does not compile, one that crashes, or another error at run time.
An "n/a" cell is a dtype the device declares unsupported (for a tinygrad device, tinygrad's own is_dtype_supported): a
declared dtype whose kernels fail is a FAIL of its kind, never n/a. Messages on a page are whole (`message_html`
collapses a long one) and keep no absolute path of the machine that made them (`scrub`).
"""
from __future__ import annotations

import html
import re
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
td.k-render-error, td.k-compile-error { background: #f6c7a8; color: #7a2e00; }
td.k-crash { background: #7a1c1c; color: #fff; } td.k-run-error { background: #f3d9e8; color: #6b1d4b; }
table.legend td { text-align: left; } .provenance { border-bottom: 1px solid #ddd; margin-bottom: 1em; }
nav.toc { background: #fafafa; border: 1px solid #eee; padding: .3em 1em; display: inline-block; }
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


def _cell(status: str | None, title: str, link: str | None, detail: str = "") -> str:
  if status is None: return "<td class=none title='no such case: the spec does not define it'></td>"
  kind = failure_kind(detail) if status == "fail" else None
  label = KIND_LABELS[kind] if kind else LABELS.get(status, status)
  body = f"<a href='{esc(link)}'>{label}</a>" if link and status in ("fail", "relaxed") else label
  what = f"FAIL, {KIND_MEANING[kind]}" if kind else MEANING.get(status, status)
  first = first_line(scrub(detail))
  hover = f"{title}: {what}" + (f" ({first})" if first and status != "pass" else "")
  return f"<td class='{esc(status)}{' k-' + kind if kind else ''}' title='{esc(hover)}'>{body}</td>"


def _table(caption: str, rows: list[str], cols: list[str], at: Callable[[str, str], str | None],
           link: Callable[[str, str], str | None], title: Callable[[str, str], str],
           detail: Callable[[str, str], str]) -> str:
  head = "".join(f"<th>{esc(c)}</th>" for c in cols)
  body = "".join(f"<tr><th>{esc(r)}</th>{''.join(_cell(at(r, c), title(r, c), link(r, c), detail(r, c)) for c in cols)}"
                 "</tr>" for r in rows)
  return (f"<table class=grid><caption class=muted>{esc(caption)}</caption><thead><tr><th></th>{head}</tr></thead>"
          f"<tbody>{body}</tbody></table>")


def grids(statuses: dict[str, str], link: Callable[[str], str | None], details: dict[str, str] | None = None) -> str:
  """One backend's cases ({case id: status}) as the op x dtype grid and the CAST / BITCAST grids (module docstring);
  `link(case)` is where a FAIL or relaxed cell points; `details` ({case id: message}) gives a FAIL cell its kind and
  every cell its hover text."""
  details = details or {}
  alu = {c: case_parts(c) for c in statuses if case_parts(c)[0] not in CONVERSIONS}
  out = []
  if alu:
    ops = sorted({op for op, _, _ in alu.values()})
    cols = _order({dt for _, dt, _ in alu.values()})
    key = {(op, dt): c for c, (op, dt, _) in alu.items()}
    out.append(_table("ALU ops (rows) on operand dtypes (columns)", ops, cols, lambda r, c: statuses.get(key.get((r, c), "")),
                      lambda r, c: link(key[(r, c)]) if (r, c) in key else None, lambda r, c: f"{r}-{c}",
                      lambda r, c: details.get(key.get((r, c), ""), "")))
  for conv in CONVERSIONS:
    cases = {c: case_parts(c) for c in statuses if case_parts(c)[0] == conv}
    if not cases: continue
    key = {(src, dst): c for c, (_, src, dst) in cases.items()}
    rows, cols = _order({s for s, _ in key}), _order({d for _, d in key})
    out.append(_table(f"{conv} from (rows) to (columns)", rows, cols, lambda r, c, k=key: statuses.get(k.get((r, c), "")),
                      lambda r, c, k=key: link(k[(r, c)]) if (r, c) in k else None, lambda r, c, v=conv: f"{v}-{r}-to-{c}",
                      lambda r, c, k=key: details.get(k.get((r, c), ""), "")))
  return "\n".join(out)


# ***** the kinds of failure (module docstring) *****

KINDS = ("wrong-value", "render-error", "compile-error", "crash", "run-error")
KIND_LABELS = {"wrong-value": "wrong", "render-error": "no render", "compile-error": "no compile", "crash": "crash",
               "run-error": "error"}
KIND_MEANING = {"wrong-value": "a wrong value: it runs and breaks the spec on some lane",
                "render-error": "does not render: the device's renderer refuses the kernel",
                "compile-error": "does not compile: the device's compiler (or shader validation) rejects the source",
                "crash": "crashes: the process died running it",
                "run-error": "another error running it"}
_RENDER = re.compile(r"does not run: (KeyError|AttributeError|NotImplementedError|RuntimeError: failed to render|"
                     r"RenderError|AssertionError)")
_COMPILE = re.compile(r"does not run: (CompileError|GPUValidationError|\w*CompileError)|shader validation|"
                      r"Compile Error|compile-error", re.IGNORECASE)
_CRASH = re.compile(r"\bcrash|SIGSEGV|SIGABRT|SIGBUS|SIGILL|Fatal Python error|died", re.IGNORECASE)


def failure_kind(detail: str) -> str:
  """The kind of a FAIL (KINDS) from its message: the op suite writes "<device>: <case> does not run: <Error>: ..." for a
  kernel that never ran, and the lanes that differ for one that ran."""
  if "does not run:" not in detail: return "wrong-value"
  if _CRASH.search(detail): return "crash"
  if _COMPILE.search(detail): return "compile-error"
  if _RENDER.search(detail): return "render-error"
  return "run-error"


def first_line(text: str, limit: int = 160) -> str:
  """The first non-empty line of a message, whole words, for hover text and summaries."""
  line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
  if len(line) <= limit: return line
  return line[:limit].rsplit(" ", 1)[0] + " ..."


_ABSOLUTE = re.compile(r"(?<![\w.:/~<>-])/(?:[\w.+@-]+/)+([\w.+@-]*)")


def scrub(text: str) -> str:
  """The message without the absolute paths of the machine that made it: /root/.cache/pocl/kcache/x.cl -> <path>/x.cl."""
  return _ABSOLUTE.sub(lambda m: f"<path>/{m.group(1)}", text)


def code_text(text: str) -> str:
  """Prose with `backticked` spans as <code> (escaped)."""
  parts = text.split("`")
  if len(parts) % 2 == 0: return esc(text)  # an unpaired backtick: the text as it is
  return "".join(f"<code>{esc(p)}</code>" if k % 2 else esc(p) for k, p in enumerate(parts))


def message_html(text: str, lines: int = 12) -> str:
  """A whole message as <pre>, collapsed behind its first line when longer than `lines` lines or 100 characters a line."""
  text = scrub(text)
  if text.count("\n") < lines and len(text) <= 100 * lines: return f"<pre>{esc(text)}</pre>"
  return f"<details><summary><code>{esc(first_line(text))}</code></summary><pre>{esc(text)}</pre></details>"


MEANING = {"pass": "agrees with the spec on every lane checked", "fail": "breaks the spec (links to its reproducer)",
           "unsupported": "a dtype the device declares unsupported", "relaxed": "an op the device declares inexact",
           "baseline": "fails exactly as on the --baseline device (not this device's failure)",
           "untested": "refimpl cannot export the case to the device (refimpl's limit, not the device's failure)"}


def legend(shown: tuple[str, ...] = STATUSES[:4]) -> str:
  """What the grid cells mean: the statuses of `shown`, FAIL by kind, and the empty cell."""
  rows = []
  for s in shown:
    if s == "fail":
      rows += [f"<tr><td class='fail k-{k}'>{KIND_LABELS[k]}</td><td>FAIL: {esc(KIND_MEANING[k])}</td></tr>" for k in KINDS]
    else: rows.append(f"<tr><td class='{s}'>{LABELS[s]}</td><td>{esc(MEANING[s])}</td></tr>")
  rows.append("<tr><td class=none></td><td>no such case: the spec does not define the op on that dtype (or that "
              "conversion)</td></tr>")
  return f"<table class='grid legend'><caption class=muted>legend (hover a cell for its message)</caption>{''.join(rows)}</table>"


def pass_rate(counts: dict[str, int]) -> str:
  """pass over supported cases (pass + FAIL + relaxed + as baseline), as "92.1% (355 of 381)"."""
  supported = sum(counts.get(s, 0) for s in ("pass", "fail", "relaxed", "baseline"))
  if not supported: return "no supported case"
  return f"{100 * counts.get('pass', 0) / supported:.1f}% ({counts.get('pass', 0)} of {supported})"


def provenance_html(prov: dict, up: str | None = None) -> str:
  """Where the page comes from (refimpl.testing.provenance), and a link back to the index when `up` is given."""
  tools = "".join(f"<tr><th>{esc(k)}</th><td>{esc(scrub(v))}</td></tr>" for k, v in prov.get("tools", {}).items())
  back = f"<p><a href='{esc(up)}'>&larr; all conformance pages (index)</a></p>" if up else ""
  return (f"<div class=provenance>{back}<p class=muted>Made on {esc(prov.get('date', 'an unknown date'))} from refimpl "
          f"commit <code>{esc(prov.get('commit', 'unknown'))}</code> by <code>{esc(prov.get('command', '?'))}</code>.</p>"
          + (f"<details><summary>toolchains of that run</summary><table>{tools}</table></details>" if tools else "")
          + "</div>")


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

"""The published pages (docs/conformance) as a reader meets them. Rules: a reader starting at index.html reaches every
page and every published fuzz finding; every link of every page lands on a file that exists and every #anchor on an
id of its page; every page but the index names its commit and date and links back to the index; no page shows an
absolute path of the machine that made it or a markdown backtick outside code; every published finding replays, on
its backend, as the failure it claims, and none is refimpl's own error; the README's figures are the published data's.
With Chromium installed, each page is rendered headless and its links and anchors are checked in the rendered DOM."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "conformance"
PAGES = sorted(DOCS.glob("*.html"))
FINDINGS = sorted(DOCS.glob("fuzz/*/*.json"))
MACHINE_PATH = re.compile(r"(?<![\w.:/~<>-])/(?:root|home|tmp|usr|work|var|opt)/[\w.+@-]")


class Links(HTMLParser):
  """A page's links, ids, and the text outside <pre> and <code>."""
  def __init__(self) -> None:
    super().__init__()
    self.hrefs: list[str] = []
    self.ids: set[str] = set()
    self.prose: list[str] = []
    self._code = 0

  def handle_starttag(self, tag, attrs) -> None:
    a = dict(attrs)
    if a.get("id"): self.ids.add(a["id"])
    if tag == "a" and a.get("href"): self.hrefs.append(a["href"])
    if tag in ("pre", "code", "style"): self._code += 1

  def handle_endtag(self, tag) -> None:
    if tag in ("pre", "code", "style"): self._code -= 1

  def handle_data(self, data) -> None:
    if not self._code: self.prose.append(data)


def read(path: Path) -> Links:
  p = Links()
  p.feed(path.read_text())
  return p


def targets(page: Path, hrefs: list[str]) -> list[tuple[Path, str, str]]:
  """(file, anchor, href) of each local link of a page (a link outside the repository's files is not followed)."""
  out = []
  for href in hrefs:
    url = urlparse(href)
    if url.scheme or url.netloc: continue
    file = (page.parent / unquote(url.path)).resolve() if url.path else page
    out.append((file, url.fragment, href))
  return out


def test_the_pages_are_there():
  assert (DOCS / "index.html") in PAGES and (DOCS / "tinygrad-0.10.1.html") in PAGES and len(PAGES) >= 6


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_link_lands_and_every_anchor_exists(page):
  ids: dict[Path, set[str]] = {}
  for file, anchor, href in targets(page, read(page).hrefs):
    assert file.exists(), f"{page.name}: {href} does not exist"
    if anchor and file.suffix == ".html":
      if file not in ids: ids[file] = read(file).ids
      assert anchor in ids[file], f"{page.name}: {href}: no id {anchor!r} there"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_page_names_where_it_comes_from_and_shows_no_machine_path_or_markdown(page):
  text = page.read_text()
  links = read(page)
  assert "Made on " in text and "commit <code>" in text, f"{page.name} does not name its commit and date"
  if page.name != "index.html": assert "index.html" in links.hrefs, f"{page.name} does not link back to the index"
  assert not MACHINE_PATH.search(text), f"{page.name}: {MACHINE_PATH.search(text).group(0)!r}"  # type: ignore[union-attr]
  prose = "".join(links.prose)
  assert "`" not in prose, f"{page.name}: a markdown backtick in prose: ...{prose[max(0, prose.find('`') - 60):][:120]}"


def test_the_index_reaches_every_page_and_every_finding():
  seen, todo = set(), [DOCS / "index.html"]
  while todo:
    page = todo.pop()
    if page in seen: continue
    seen.add(page)
    for file, _, _ in targets(page, read(page).hrefs):
      if file.suffix == ".html" and file.parent == DOCS and file.exists(): todo.append(file)
      else: seen.add(file)
  assert set(PAGES) <= seen, sorted(p.name for p in set(PAGES) - seen)
  assert set(FINDINGS) <= seen, sorted(str(p.relative_to(DOCS)) for p in set(FINDINGS) - seen)


@pytest.fixture(scope="module")
def replayed() -> dict:
  """Every published finding whose backend opens here, replayed in one pool of fresh workers."""
  from refimpl.device import Device
  from refimpl.tinygrad.report.runner import replays_as_claimed
  opens = [p for p in FINDINGS if Device.open_error(json.loads(p.read_text())["backend"]) is None]
  return replays_as_claimed(opens)


@pytest.mark.parametrize("path", FINDINGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_published_finding_replays_as_the_failure_it_claims(path, replayed):
  """The finding fails on its backend now (a fresh isolated worker), with the kind it claims; refimpl's own errors
  (refimpl-error, refimpl's UndefinedBehavior raised by the harness) are never published."""
  from refimpl.device import Device
  doc = json.loads(path.read_text())
  assert doc["signature"]["kind"].replace(":", "-") != "refimpl-error" and "UndefinedBehavior" not in doc.get("detail", "")
  why = Device.open_error(doc["backend"])
  if why is not None: pytest.skip(f"{doc['backend']} does not open here: {why}")
  ok, did, unsupported_here = replayed[path]
  if unsupported_here: pytest.skip(f"{doc['backend']} here lacks what the finding needs ({did}); it replays where it has it")
  assert ok, f"{path.name} claims {doc['signature']['kind']}, replays as {did}"


def test_the_readme_figures_are_the_published_data():
  """The README's table of tinygrad's backends (pass rate, failing tests, suite wall time) is the report's data."""
  from refimpl.tinygrad.report.pages import readme_rows
  readme = (ROOT / "README.md").read_text()
  rows = readme_rows(json.loads((DOCS / "tinygrad-0.10.1.json").read_text()))
  assert rows and all(row in readme for row in rows), "\n".join(r for r in rows if r not in readme)


CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium): the pages are not "
                                             "rendered; the html.parser checks above still run")
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_each_page_renders_in_headless_chromium_with_its_links_and_anchors(page, tmp_path):
  """The DOM Chromium builds from the page (--dump-dom) has a title and a body, and its links and ids pass the same
  checks as the source's."""
  res = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path}",
                        "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, check=False)
  assert res.returncode == 0 and "<body" in res.stdout, res.stderr[-2000:]
  dom = tmp_path / page.name
  dom.write_text(res.stdout)
  links = read(dom)
  assert "<title>" in res.stdout and links.hrefs
  assert {h for h in links.hrefs} == set(read(page).hrefs)  # nothing lost to a malformed tag
  for file, anchor, href in targets(page, links.hrefs):
    assert file.exists(), f"{page.name}: {href} does not exist"
    if anchor and file.suffix == ".html": assert anchor in (links.ids if file == page else read(file).ids), href


def test_no_published_file_names_a_path_of_the_machine_that_made_it():
  """The data and the findings beside the pages (JSON, markdown) keep no absolute path of that machine either."""
  files = [*DOCS.glob("*.json"), *DOCS.glob("*.md"), *FINDINGS, *DOCS.glob("tinygrad-selftest-undefined/*.json")]
  bad = [f"{p.relative_to(DOCS)}: {m.group(0)}" for p in files for m in [MACHINE_PATH.search(p.read_text())] if m]
  assert files and not bad, bad


def test_no_published_page_holds_a_nul_byte():
  """A compiler log's NUL bytes (NVRTC ends its log with them) never reach a page or its data."""
  files = [*DOCS.glob("*.html"), *DOCS.glob("*.json"), *DOCS.glob("*.md")]
  assert files and not [p.name for p in files if b"\x00" in p.read_bytes()]

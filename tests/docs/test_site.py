"""The documentation site: built with ``mkdocs build --strict``, served over loopback, opened in
headless Chromium.

``scripts/test`` builds the site into ``site/`` before pytest and passes it on in
``JOBWIRE_DOCS_SITE``; without it, the tests build their own copy once. Chromium is Debian's
``chromium``: without it the browser tests skip, or fail under JOBWIRE_REQUIRE_REAL_SERVERS=1.
Chromium is told to resolve no name at all, so it can reach nothing but the loopback server.
"""

from __future__ import annotations

import functools
import html.parser
import json
import os
import shutil
import struct
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from jobwire.testing import unavailable

from ..conftest import load_file

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


plots = load_file("jobwire_benchmark_plots", ROOT / "benchmarks" / "plots.py")
hooks = load_file("jobwire_docs_hooks", ROOT / "docs" / "hooks.py")


# -- the site, built and served -----------------------------------------------------------------


def nav_pages() -> list[tuple[str, str]]:
    """(title, markdown file) of every page in mkdocs.yml's nav."""
    from mkdocs.utils.yaml import yaml_load

    with open(ROOT / "mkdocs.yml", encoding="utf-8") as f:
        config = yaml_load(f)
    pages: list[tuple[str, str]] = []

    def walk(items: list[Any], section: str) -> None:
        for item in items:
            if isinstance(item, str):
                pages.append((section, item))
                continue
            for title, value in item.items():
                if isinstance(value, list):
                    walk(value, title)
                else:
                    pages.append((title, value))

    walk(config["nav"], "")
    return pages


def page_url(md: str) -> str:
    """The site path mkdocs gives ``md`` (directory URLs)."""
    stem = md[: -len(".md")]
    if stem == "index":
        return ""
    if stem.endswith("/index"):
        return stem[: -len("index")]
    return stem + "/"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("JOBWIRE_DOCS_SITE")
    if given and (Path(given) / "index.html").is_file():
        return Path(given)
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run(
        # Not --quiet: mkdocs then drops the warnings before --strict counts them.
        [PYTHON, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert build.returncode == 0, f"mkdocs build --strict failed:\n{build.stdout}{build.stderr}"
    return out


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def base_url(site: Path) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()
    thread.join(5)


class _Refs(html.parser.HTMLParser):
    """Every URL a page links to (``a href``) and loads (``link href``, ``script src``,
    ``img src``)."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.loads: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "a" and values.get("href"):
            self.links.append(values["href"] or "")
        elif tag == "link" and values.get("href"):
            self.loads.append(values["href"] or "")
        elif tag in ("script", "img", "source", "iframe") and values.get("src"):
            self.loads.append(values["src"] or "")


def _get(url: str) -> tuple[int, bytes, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return reply.status, reply.read(), reply.headers.get_content_type()
    except urllib.error.HTTPError as exc:
        return exc.code, b"", ""


def crawl(base: str) -> tuple[dict[str, int], dict[str, list[str]]]:
    """Fetch every page reachable from the home page and every asset the pages load: the
    status of each URL, and the URLs on other hosts that each page *loads*."""
    host = urllib.parse.urlsplit(base).netloc
    status: dict[str, int] = {}
    foreign: dict[str, list[str]] = {}
    todo = [base]
    while todo:
        url = todo.pop()
        if url in status:
            continue
        code, body, kind = _get(url)
        status[url] = code
        if code != 200 or kind != "text/html":
            continue
        refs = _Refs()
        refs.feed(body.decode("utf-8"))
        for ref, loaded in [(r, False) for r in refs.links] + [(r, True) for r in refs.loads]:
            target = urllib.parse.urljoin(url, ref)
            parts = urllib.parse.urlsplit(target)
            if parts.scheme not in ("http", "https"):
                continue  # mailto:, data:
            if parts.netloc != host:
                if loaded:
                    foreign.setdefault(url, []).append(target)
                continue
            todo.append(urllib.parse.urlunsplit(parts._replace(fragment="", query="")))
    return status, foreign


# -- headless Chromium ----------------------------------------------------------------------------


def _chromium_binary() -> str:
    for name in ("chromium", "chromium-browser"):
        if path := shutil.which(name):
            return path
    unavailable("chromium is not installed (apt-get install chromium)")


@pytest.fixture(scope="module")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Any:
    binary = _chromium_binary()
    profile = tmp_path_factory.mktemp("chromium-profile")

    def run(url: str, *args: str, height: int = 900) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-default-apps", f"--user-data-dir={profile}",
             "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
             "--enable-logging=stderr", "--v=0",
             f"--window-size=1280,{height}", "--virtual-time-budget=5000", *args, url],
            capture_output=True, text=True, timeout=120,
        )

    return run


def dom(chromium: Any, url: str) -> tuple[str, str]:
    """The page's DOM after its scripts ran, and what the page logged to the console."""
    done = chromium(url, "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, done.stderr


def console_errors(log: str) -> list[str]:
    return [line for line in log.splitlines() if "CONSOLE" in line and "Uncaught" in line]


# -- the build ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_every_page_and_every_asset_it_loads_is_served(site: Path, base_url: str) -> None:
    status, foreign = crawl(base_url)
    missing = {url: code for url, code in status.items() if code != 200}
    assert missing == {}
    expected = {base_url + page_url(md) for _, md in nav_pages()}
    assert expected - set(status) == set(), "nav pages the links do not reach"
    assert sum(url.endswith((".css", ".js")) for url in status) >= 3
    # The pages load nothing from other hosts (no fonts, no CDN scripts): a reader behind a
    # firewall, or this sandbox, sees the whole site.
    assert foreign == {}
    # The checker itself sees a missing page.
    assert _get(base_url + "no-such-page/")[0] == 404


@pytest.mark.slow
def test_the_api_pages_list_every_public_name(site: Path) -> None:
    import importlib

    packages = {
        "beanstalk_client": "api/beanstalk_client", "gearman_client": "api/gearman_client",
        "workq_client": "api/workq_client", "qless_client": "api/qless_client",
        "jobwire.errors": "api/errors", "jobwire.testing": "api/testing",
        "jobwire.serializers": "api/serializers",
    }
    for package, page in packages.items():
        text = (site / page / "index.html").read_text(encoding="utf-8")
        names = importlib.import_module(package).__all__
        absent = [n for n in names if f'id="{package}.{n}"' not in text]
        assert absent == [], f"{page}: no entry for {absent}"
    # jobwire.spark needs PySpark to import; its __all__ is read from the source instead.
    import ast

    tree = ast.parse((ROOT / "jobwire" / "spark" / "__init__.py").read_text(encoding="utf-8"))
    names = next(
        ast.literal_eval(node.value) for node in tree.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "__all__"
    )
    text = (site / "api" / "spark" / "index.html").read_text(encoding="utf-8")
    assert [n for n in names if f'id="jobwire.spark.{n}"' not in text] == []


# -- in the browser -----------------------------------------------------------------------------


@pytest.mark.slow
def test_the_home_page_renders_with_the_whole_nav(base_url: str, chromium: Any) -> None:
    page, log = dom(chromium, base_url)
    assert console_errors(log) == []
    assert "<h1" in page and "Sans-IO state machines" in page
    for title, md in nav_pages():
        href = page_url(md) or "."
        assert f'href="{href}"' in page or f'href="./{href}"' in page, (title, md)
        assert title in page, title
    # Code blocks are highlighted by Pygments (keywords get their own spans), and Material's
    # scripts ran: they give each code block its copy button.
    assert '<div class="highlight"><pre id="__code_0">' in page
    assert '<code><span class="kn">from</span><span class="w"> </span>' in page
    assert 'title="Copy to clipboard" data-clipboard-target="#__code_0 &gt; code"' in page


@pytest.mark.slow
def test_the_worker_patterns_diagrams_are_drawn(base_url: str, site: Path, chromium: Any) -> None:
    """The diagrams are drawn by the site's own copy of mermaid (docs/js/, vendored): the
    browser resolves no host name, so a CDN copy could not load."""
    source = (site / "patterns" / "index.html").read_text(encoding="utf-8")
    assert source.count('<pre class="mermaid">') == 2  # what the build wrote
    assert '<script src="../js/mermaid.min.js"></script>' in source
    assert (site / "js" / "mermaid.min.js").stat().st_size > 1_000_000
    home = (site / "index.html").read_text(encoding="utf-8")
    assert "mermaid.min.js" not in home  # a page without a diagram does not load it
    page, log = dom(chromium, base_url + "patterns/")
    assert console_errors(log) == []
    assert "DEADLINE_SOON" in page and "max_ack_delay" in page
    # Material swaps each <pre class="mermaid"> for a <div class="mermaid"> holding the drawn
    # SVG once mermaid rendered it; a diagram mermaid cannot parse, or a mermaid that never
    # loaded, leaves a <pre>.
    assert page.count('<div class="mermaid">') == 2, "a diagram was not drawn"
    assert '<pre class="mermaid">' not in page


@pytest.mark.slow
def test_the_api_page_shows_client_put_with_its_docstring(base_url: str, chromium: Any) -> None:
    page, log = dom(chromium, base_url + "api/beanstalk_client/")
    assert console_errors(log) == []
    start = page.index('id="beanstalk_client.Client.put"')
    entry = page[start:start + 6000]
    assert "Send <code>put &lt;priority&gt; &lt;delay&gt; &lt;ttr&gt; &lt;bytes&gt;</code>" in entry
    assert "return the new job id" in entry
    assert "JobTooBig" in entry  # its Raises section
    assert 'class="doc-signature highlight"' in entry
    # Sphinx roles in the docstrings are shown as plain code, not as ":meth:`x`".
    assert ":meth:<code>" not in page and ":class:<code>" not in page
    assert "<code>~" not in page


@pytest.mark.slow
def test_the_performance_page_shows_the_plots_or_says_there_are_none(
    base_url: str, site: Path, chromium: Any
) -> None:
    page, log = dom(chromium, base_url + "performance/")
    assert console_errors(log) == []
    plotted = sorted(p.stem for p in (site / "assets" / "benchmarks").glob("*.png"))
    drawn = sorted(p.stem for p in plots.results_files(hooks.results_dir(ROOT))[0])
    if os.environ.get("JOBWIRE_BENCH_RESULTS") is None:
        assert plotted == drawn
    if plotted:
        for name in plotted:
            assert f'src="../assets/benchmarks/{name}.png"' in page
        assert "No benchmark results" not in page
    else:
        assert "No benchmark results were present when this site was built" in page


@pytest.mark.slow
def test_a_screenshot_of_the_worker_patterns_page(
    base_url: str, chromium: Any, tmp_path: Path
) -> None:
    shot = tmp_path / "patterns.png"
    done = chromium(base_url + "patterns/", f"--screenshot={shot}", height=900)
    assert done.returncode == 0, done.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1280, 900)
    assert len(data) > 50_000  # a rendered page, not a blank one
    keep = os.environ.get("JOBWIRE_DOCS_SCREENSHOT")
    if keep:
        shutil.copyfile(shot, keep)


# -- plots and hooks without a build ------------------------------------------------------------


def test_no_results_is_said_plainly(tmp_path: Path) -> None:
    files, skipped = plots.results_files(tmp_path)
    assert (files, skipped) == ([], [])
    text = hooks.results_markdown([], [], tmp_path)
    assert "No benchmark results were present when this site was built" in text
    assert "scripts/bench all" in text


def test_a_results_file_without_its_shape_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "gearman.json").write_text(json.dumps({"counts": {}}))
    with pytest.raises(plots.BadResults, match=r"gearman\.json: no 'config'"):
        plots.charts(tmp_path)
    (tmp_path / "gearman.json").write_text("{not json")
    with pytest.raises(plots.BadResults, match=r"gearman\.json"):
        plots.charts(tmp_path)
    # A file no plotter knows is reported, not drawn and not fatal.
    (tmp_path / "gearman.json").unlink()
    (tmp_path / "resp_parse.json").write_text("{}")
    report = plots.charts(tmp_path)
    assert report.charts == [] and report.skipped == ["resp_parse.json: no plot for this file"]


@pytest.mark.slow
def test_every_committed_results_file_is_drawn() -> None:
    files, _ = plots.results_files(plots.RESULTS)
    for path in files:
        chart = plots.chart_file(path)
        assert chart.png[:8] == b"\x89PNG\r\n\x1a\n", path
        assert chart.table.count("\n") >= 2, path


@pytest.mark.slow
def test_a_fresh_workq_benchmark_run_is_drawn(tmp_path: Path) -> None:
    """The real benchmark script's output (quick run, bundled server), not a sample of it."""
    out = tmp_path / "workq.json"
    run = subprocess.run([PYTHON, str(ROOT / "benchmarks" / "workq.py"), "--quick", "--out",
                          str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    chart = plots.chart_file(out)
    document = json.loads(out.read_text())
    titles = document["config"]["scenarios"]
    for row in document["results"]:
        assert f"| {titles[row['scenario']]} | {row['label']} |" in chart.table
    width, height = struct.unpack(">II", chart.png[16:24])
    assert width > 600 and height > 300
    assert subprocess.run([PYTHON, str(ROOT / "benchmarks" / "plots.py"), "--results",
                           str(tmp_path), "--out", str(tmp_path / "png")],
                          capture_output=True, timeout=120).returncode == 0
    assert (tmp_path / "png" / "workq.png").read_bytes() == chart.png


def test_sphinx_roles_become_plain_code() -> None:
    html = ("see :class:<code>Client</code>, :meth:<code>~gearman_client.Client.submit</code>, "
            ":py:func:<code>x.f</code> and a:b:<code>z</code>")
    assert hooks.tidy_roles(html) == (
        "see <code>Client</code>, <code>submit</code>, <code>x.f</code> and a:b:<code>z</code>"
    )


def test_long_signatures_are_laid_out_one_parameter_a_line() -> None:
    code = ('def xxxxxxxx(self, body: bytes, *, priority: int = DEFAULT_PRIORITY, '
            'note: str = "a, (b", tubes: dict[str, int] = {}) -> list[int]: pass')
    assert hooks.format_signature(code, 60) == (
        "def xxxxxxxx(\n"
        "    self,\n"
        "    body: bytes,\n"
        "    *,\n"
        "    priority: int = DEFAULT_PRIORITY,\n"
        '    note: str = "a, (b",\n'
        "    tubes: dict[str, int] = {},\n"
        ") -> list[int]: pass\n"
    )
    assert hooks.format_signature("def f(a: int) -> None: pass", 60) == (
        "def f(a: int) -> None: pass\n"
    )

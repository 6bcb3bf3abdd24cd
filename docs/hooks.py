"""mkdocs hooks of the jobwire site (``hooks:`` in mkdocs.yml).

- **Performance plots.** ``benchmarks/plots.py`` draws every ``benchmarks/results/*.json`` at
  build time; the PNGs go into the built site only (nothing is written into ``docs/``), and
  the figures, with their numbers as tables, replace the ``<!-- benchmark plots -->`` line of
  ``performance.md``. With no results file the page says so. A results file that lacks its
  benchmark's shape stops the build, naming the file. Drawn figures are cached by the bytes
  of the results file and of ``plots.py`` (``$XDG_CACHE_HOME/jobwire-docs``, else
  ``~/.cache/jobwire-docs``), so a build whose results did not change skips matplotlib.
- **Signatures.** mkdocstrings formats each long signature by running ``ruff format`` in a
  subprocess (about 160 of them here: a third of the build). :func:`format_signature` does
  the same layout in-process (one parameter per line, trailing comma); if mkdocstrings-python
  moves its private formatter hook, the build only gets slower.
- **Sphinx roles.** The docstrings write ``:class:`Client``` and ``:meth:`~x.Client.put```,
  which mkdocstrings leaves as text: on the API pages the role goes, and ``~a.b.c`` shows
  as ``c``, as Sphinx shows it.
- **Mermaid.** The script is vendored (``docs/js/mermaid.min.js``, copied into the site as
  it is); a page with a diagram gets a ``<script>`` tag for it, and Material then draws with
  that copy instead of fetching one from its CDN: diagrams draw offline, and pages without
  one do not load its 3.5 MB.

Environment: ``JOBWIRE_BENCH_RESULTS`` (another results directory), ``JOBWIRE_DOCS_CACHE``
(another cache directory; ``off``: none).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page
from mkdocs.utils import get_relative_url

log = logging.getLogger("mkdocs.hooks.jobwire")

MARKER = "<!-- benchmark plots -->"
#: The vendored mermaid script, as a path in the site.
MERMAID_URI = "js/mermaid.min.js"
PLOTS_URI = "assets/benchmarks"

_charts: list[Any] = []
_skipped: list[str] = []
_results_dir = Path()


def _root(config: MkDocsConfig) -> Path:
    return Path(config.config_file_path).resolve().parent


def _plots_module(root: Path) -> ModuleType:
    path = root / "benchmarks" / "plots.py"
    spec = importlib.util.spec_from_file_location("jobwire_benchmark_plots", path)
    if spec is None or spec.loader is None:
        raise PluginError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def results_dir(root: Path) -> Path:
    """Where the benchmark results are read from."""
    return Path(os.environ.get("JOBWIRE_BENCH_RESULTS") or root / "benchmarks" / "results")


def _split_top_level(text: str) -> list[str]:
    """``text`` split at the commas outside brackets and string literals."""
    parts, depth, quote, start = [], 0, "", 0
    for i, char in enumerate(text):
        if quote:
            if char == quote and text[i - 1] != "\\":
                quote = ""
        elif char in "\"'":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [part for part in parts if part]


def format_signature(code: str, line_length: int) -> str:
    """Lay out ``def name(params) -> ret: pass`` as ruff would: on one line when it fits,
    else one parameter per line with a trailing comma. Anything else comes back as it is."""
    code = code.strip()
    if len(code) <= line_length or not code.startswith("def ") or "(" not in code:
        return code + "\n"
    open_at = code.index("(")
    depth, quote, close_at = 0, "", -1
    for i in range(open_at, len(code)):
        char = code[i]
        if quote:
            if char == quote and code[i - 1] != "\\":
                quote = ""
        elif char in "\"'":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                close_at = i
                break
    if close_at < 0:
        return code + "\n"
    params = _split_top_level(code[open_at + 1:close_at])
    if not params:
        return code + "\n"
    body = "".join(f"    {param},\n" for param in params)
    return f"{code[:open_at + 1]}\n{body}{code[close_at:]}\n"


def _use_in_process_formatter() -> None:
    try:
        from mkdocstrings_handlers.python._internal import rendering
    except ImportError:
        return
    if callable(getattr(rendering, "_get_formatter", None)):
        rendering._get_formatter = lambda: format_signature  # type: ignore[attr-defined]


def cache_dir() -> Path | None:
    """Where drawn figures are kept between builds (None: nowhere)."""
    given = os.environ.get("JOBWIRE_DOCS_CACHE")
    if given == "off":
        return None
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "jobwire-docs"


def draw(plots: ModuleType, path: Path, cache: Path | None) -> Any:
    """``plots.chart_file(path)``, from the cache when the same file was drawn by the same
    ``plots.py`` before."""
    if cache is None:
        return plots.chart_file(path)
    key = hashlib.sha256(Path(plots.__file__).read_bytes() + b"\0" + path.name.encode()
                         + b"\0" + path.read_bytes()).hexdigest()[:32]
    entry = cache / f"{key}.json"
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        kept = json.loads(entry.read_text(encoding="utf-8"))
        return plots.Chart(kept["name"], kept["source"], kept["title"],
                           base64.b64decode(kept["png"]), kept["table"], kept["notes"])
    chart = plots.chart_file(path)
    with contextlib.suppress(OSError):
        cache.mkdir(parents=True, exist_ok=True)
        temporary = entry.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps({
            "name": chart.name, "source": chart.source, "title": chart.title,
            "png": base64.b64encode(chart.png).decode(), "table": chart.table,
            "notes": chart.notes,
        }), encoding="utf-8")
        temporary.replace(entry)
    return chart


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    global _results_dir
    _use_in_process_formatter()
    root = _root(config)
    _results_dir = results_dir(root)
    plots = _plots_module(root)
    files, skipped = plots.results_files(_results_dir)
    cache = cache_dir()
    try:
        _charts[:] = [draw(plots, path, cache) for path in files]
    except plots.BadResults as exc:
        raise PluginError(f"benchmark results: {exc}") from exc
    _skipped[:] = skipped
    for message in skipped:
        log.info("benchmark results: %s", message)
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for chart in _charts:
        files.append(File.generated(config, f"{PLOTS_URI}/{chart.name}.png", content=chart.png))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    if page.file.src_uri != "performance.md":
        return markdown
    if MARKER not in markdown:
        log.warning("performance.md has no %r line for the benchmark plots", MARKER)
        return markdown
    return markdown.replace(MARKER, results_markdown(_charts, _skipped, _results_dir))


_ROLE = re.compile(r":(?:py:)?(?:mod|class|func|meth|attr|exc|data|obj|const):(?=<code>)")
_TILDE = re.compile(r"<code>~(?:[\w.]+\.)?(\w+)</code>")


def tidy_roles(html: str) -> str:
    """Drop the Sphinx role before each ``<code>`` and shorten ``~a.b.c`` to ``c``."""
    return _TILDE.sub(r"<code>\1</code>", _ROLE.sub("", html))


def on_page_content(html: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    return tidy_roles(html) if page.file.src_uri.startswith("api/") else html


def results_markdown(charts: list[Any], skipped: list[str], where: Path) -> str:
    """The Performance page's generated part: a figure and a table per results file, or a
    plain statement that there are none."""
    if not charts:
        return (
            "!!! note \"No benchmark results\"\n"
            f"    No benchmark results were present when this site was built (none in "
            f"`{_shown(where)}`), so there are no plots here. `scripts/bench all` writes "
            "them (`benchmarks/results/<system>.json`); build the site again afterwards.\n"
        )
    out: list[str] = []
    for chart in charts:
        out += [
            f"### {chart.title} {{#bench-{chart.name}}}",
            "",
            f"![{chart.title}]({PLOTS_URI}/{chart.name}.png)",
            "",
            f"From `benchmarks/results/{chart.source}`.",
            "",
        ]
        out += [f"- Not plotted: {note}" for note in chart.notes]
        if chart.notes:
            out.append("")
        out += ['??? note "The numbers"', ""]
        out += [f"    {line}" for line in chart.table.splitlines()]
        out.append("")
    if skipped:
        out += ["Results files without a plot: " + "; ".join(skipped) + ".", ""]
    return "\n".join(out)


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve())) + "/"
    except ValueError:
        return str(path) + "/"


def on_post_page(output: str, page: Page, config: MkDocsConfig) -> str:
    """Load the vendored mermaid script on the pages that have a diagram, before Material's
    own scripts look for it."""
    if '<pre class="mermaid">' not in output:
        return output
    src = get_relative_url(MERMAID_URI, page.url)
    head, body_end, tail = output.rpartition("</body>")
    if not body_end:
        raise PluginError(f"{page.file.src_uri}: no </body> to load mermaid before")
    return f'{head}<script src="{src}"></script>\n{body_end}{tail}'

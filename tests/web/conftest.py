"""The dashboard in a real browser: Debian's chromium driven by its chromium-driver through
Selenium, headless, against the dashboard served in-process (uvicorn in a thread) over the
plugin's real servers. Nothing is downloaded: the driver is the installed one. Without it the
tests skip, saying so, or fail under JOBWIRE_REQUIRE_REAL_SERVERS=1 (CI)."""

from __future__ import annotations

import base64
import importlib.util
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from jobwire.testing import find_binary, free_port, unavailable

from ..waiting import wait_until

if TYPE_CHECKING:
    from selenium import webdriver


def need(module: str, what: str) -> None:
    """Skip (fail under JOBWIRE_REQUIRE_REAL_SERVERS=1) when ``module`` is not installed."""
    if importlib.util.find_spec(module) is None:
        unavailable(f"{module} is not installed ({what})")


@dataclass
class Dashboard:
    """A dashboard served on 127.0.0.1 (``url`` ends without ``/``)."""

    url: str
    server: Any
    thread: threading.Thread

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
        return self.request("GET", path, None, headers)

    def post(self, path: str, form: str, headers: dict[str, str] | None = None
             ) -> tuple[int, str]:
        return self.request("POST", path, form.encode(), {
            "Content-Type": "application/x-www-form-urlencoded", **(headers or {})})

    def request(self, method: str, path: str, data: bytes | None,
                headers: dict[str, str] | None) -> tuple[int, str]:
        """The status and body of one request (no redirect followed)."""
        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args: Any) -> None:
                return None

        opener = urllib.request.build_opener(NoRedirect)
        req = urllib.request.Request(self.url + path, data=data, headers=headers or {},
                                     method=method)
        try:
            with opener.open(req, timeout=30) as reply:
                return reply.status, reply.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()


def basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


@pytest.fixture
def dashboard() -> Iterator[Callable[..., Dashboard]]:
    """``dashboard(urls, **create_app options)``: serve one in a thread; stopped after."""
    need("starlette", "pip install 'jobwire[web]'")
    import uvicorn

    from jobwire.web import create_app

    started: list[Dashboard] = []

    def start(urls: Sequence[str], **options: Any) -> Dashboard:
        port = free_port()
        options.setdefault("refresh", 0.5)
        config = uvicorn.Config(create_app(urls, **options), host="127.0.0.1", port=port,
                                log_level="warning", lifespan="on")
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, name="dashboard", daemon=True)
        thread.start()
        wait_until(lambda: server.started, 30, "the dashboard listening")
        started.append(Dashboard(f"http://127.0.0.1:{port}", server, thread))
        return started[-1]

    yield start
    for running in started:
        running.server.should_exit = True
        running.thread.join(30)


def _driver_path() -> str:
    path = find_binary("chromedriver")
    if path is None:
        unavailable("chromium-driver is not installed (apt-get install -y chromium-driver)")
    return path


def new_browser() -> webdriver.Chrome:
    """Headless chromium through the installed chromedriver (no Selenium Manager download)."""
    need("selenium", "the test extra")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    chromium = find_binary("chromium")
    if chromium is None:
        unavailable("chromium is not installed (apt-get install -y chromium)")
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1280,900", "--no-first-run", "--disable-extensions"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # console errors, read back
    return webdriver.Chrome(options=options, service=Service(executable_path=_driver_path()))


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    """One headless browser for the module's tests."""
    driver = new_browser()
    yield driver
    driver.quit()


def cell(driver: webdriver.Chrome, server: int, queue: str, key: str) -> str:
    """The text of an overview cell (server ``server``, row ``queue``, column ``key``)."""
    from selenium.webdriver.common.by import By

    rows = driver.find_elements(By.CSS_SELECTOR, f'table[data-server="{server}"] tr[data-queue]')
    for row in rows:
        if row.get_attribute("data-queue") == queue:
            return row.find_element(By.CSS_SELECTOR, f'td[data-key="{key}"]').text
    return ""


def wait_cell(driver: webdriver.Chrome, server: int, queue: str, key: str, value: str,
              timeout: float = 30) -> None:
    """Wait until the page shows ``value`` in that cell (fails with the last text seen)."""
    from selenium.common.exceptions import StaleElementReferenceException

    wait_until(lambda: cell(driver, server, queue, key) == value, timeout,
               f"{queue} {key} = {value} on the page", ignoring=(StaleElementReferenceException,))

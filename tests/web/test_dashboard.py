"""``jobwire dashboard`` in a real browser over the real servers (beanstalkd, gearmand,
redis-server for qless, and the Workq session server): the pages render, counts change as jobs
move, actions change the server's state only with ``allow_actions``, forged POSTs are refused,
basic auth holds, and no credential is shown."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jobwire.testing import free_port

from ..waiting import wait_until
from .conftest import Dashboard, basic, cell, new_browser, wait_cell

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def servers(beanstalk_server: Any, gearman_server: Any, workq_server: Any,
            redis_server: Any, qless_client: Any) -> list[str]:
    """The four servers' URLs (the qless database flushed), in the dashboard's order."""
    return [beanstalk_server.url, gearman_server.url, workq_server.url, redis_server.url]


try:
    from selenium.common.exceptions import WebDriverException
except ImportError:  # the tests skip (conftest)
    WebDriverException = Exception  # type: ignore[assignment,misc]


def by_css(driver: Any, css: str) -> Any:
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, css)


def text_of(driver: Any) -> str:
    return str(driver.execute_script("return document.body ? document.body.innerText : ''"))


def shown(driver: Any, text: str, timeout: float = 30) -> None:
    """Wait until the page's text holds ``text`` (the page may be on its way to another)."""
    from selenium.common.exceptions import WebDriverException

    wait_until(lambda: text in text_of(driver), timeout, f"{text!r} on the page",
               ignoring=(WebDriverException,))


def click(driver: Any, css: str, *, accept: bool | None = None) -> None:
    """Click the first element matching ``css``; ``accept`` answers the confirm() it opens."""
    by_css(driver, css)[0].click()
    if accept is not None:
        alert = wait_until(lambda: _alert(driver), 10, "the confirmation dialog")
        alert.accept() if accept else alert.dismiss()


def _alert(driver: Any) -> Any:
    from selenium.common.exceptions import NoAlertPresentException

    try:
        return driver.switch_to.alert
    except NoAlertPresentException:
        return None


# -- pages ----------------------------------------------------------------------------------------


def test_every_systems_pages_render(
    dashboard: Callable[..., Dashboard], browser: Any, servers: list[str],
    beanstalk_client: Any, beanstalk_tube: str, gearman_client: Any, gearman_function: str,
    workq_client: Any, workq_name: str, qless_client: Any, qless_queue: str,
) -> None:
    put = beanstalk_client.put(b"beanstalk body <b>1</b>")
    gearman_client.submit_background(gearman_function, b"x")
    added = workq_client.add(workq_name, b"workq payload", ttl=600)
    evil = "<img src=x onerror=alert(1)>"
    jid = qless_client.queue(qless_queue).put(evil, {"n": 1})
    qless_client.queue(qless_queue).pop().fail("app.Broken", "it broke")
    qless_client.queue(qless_queue).put("app.Other", {"n": 2})
    site = dashboard(servers)
    browser.get_log("browser")  # from here on: no console error (a CSP violation, a 404)

    browser.get(site.url + "/")
    wait_cell(browser, 0, beanstalk_tube, "ready", "1")
    wait_cell(browser, 1, gearman_function, "queued", "1")
    wait_cell(browser, 2, workq_name, "ready", "1")
    wait_cell(browser, 3, qless_queue, "waiting", "1")
    assert by_css(browser, "section.server h2 small")[3].text == redis_server_label(servers[3])

    browser.get(f"{site.url}/s/0/queue?name={beanstalk_tube}")
    shown(browser, "beanstalk body <b>1</b>")  # the body as text, not markup
    assert by_css(browser, 'section[data-peek="ready"] a')[0].text == f"job {put}"
    assert by_css(browser, "svg.chart")  # the counts by state, drawn
    browser.get(f"{site.url}/s/0/job?id={put}")
    assert by_css(browser, "strong.state")[0].text == "ready"

    browser.get(f"{site.url}/s/1/queue?name={gearman_function}")
    shown(browser, f"function {gearman_function}")
    assert by_css(browser, "table.jobs tr[data-job]")  # the server's job handles

    browser.get(f"{site.url}/s/2/queue?name={workq_name}")
    assert [r.get_attribute("data-job") for r in by_css(browser, "tr[data-job]")] == [added]
    browser.get(f"{site.url}/s/2/job?id={added}")
    shown(browser, "workq payload")

    browser.get(f"{site.url}/s/3/queue?name={qless_queue}")
    assert len(by_css(browser, "figure.histogram svg")) == 2  # wait and run times
    assert [r.get_attribute("data-job") for r in by_css(browser, "tr[data-job]")] != []
    browser.get(f"{site.url}/s/3/job?id={jid}")
    shown(browser, "history")
    assert evil in text_of(browser)  # shown as text: no alert opened (Selenium would raise)
    assert by_css(browser, "strong.state")[0].text == "failed"

    browser.get(f"{site.url}/s/3/failed")
    assert [g.get_attribute("data-group") for g in by_css(browser, "tr[data-group]")] == [
        "app.Broken"]
    browser.get(f"{site.url}/s/3/failed?group=app.Broken")
    assert [j.get_attribute("data-job") for j in by_css(browser, "section.failed-job")] == [jid]
    shown(browser, "it broke")
    assert [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []


def redis_server_label(url: str) -> str:
    from jobwire._url import redact

    return redact(url)


def test_counts_change_live_without_a_reload(
    dashboard: Callable[..., Dashboard], browser: Any, servers: list[str],
    beanstalk_client: Any, beanstalk_tube: str, gearman_client: Any, gearman_function: str,
    workq_client: Any, workq_name: str, qless_client: Any, qless_queue: str,
) -> None:
    beanstalk_client.put(b"first")
    workq_client.add(workq_name, b"first", ttl=600)
    qless_client.queue(qless_queue).put("app.Job", {})
    gearman_client.submit_background(gearman_function, b"first")
    site = dashboard(servers)
    browser.get(site.url + "/")
    wait_cell(browser, 0, beanstalk_tube, "ready", "1")
    browser.execute_script("window.notReloaded = true")

    beanstalk_client.put_many([b"a", b"b"])
    workq_client.add_many(workq_name, [b"a", b"b"], ttl=600)
    qless_client.queue(qless_queue).put_many([("app.Job", {}), ("app.Job", {})])
    gearman_client.submit_background(gearman_function, b"second")
    wait_cell(browser, 0, beanstalk_tube, "ready", "3")
    wait_cell(browser, 1, gearman_function, "queued", "2")
    wait_cell(browser, 2, workq_name, "ready", "3")
    wait_cell(browser, 3, qless_queue, "waiting", "3")

    job = beanstalk_client.reserve(5)  # ready -> reserved, then buried
    wait_cell(browser, 0, beanstalk_tube, "reserved", "1")
    beanstalk_client.bury(job)
    wait_cell(browser, 0, beanstalk_tube, "buried", "1")
    wait_cell(browser, 0, beanstalk_tube, "ready", "2")
    qless_client.queue(qless_queue).pop()
    wait_cell(browser, 3, qless_queue, "running", "1")
    assert browser.execute_script("return window.notReloaded") is True


# -- actions --------------------------------------------------------------------------------------


def test_kick_and_delete_a_buried_beanstalk_job(
    dashboard: Callable[..., Dashboard], browser: Any, beanstalk_server: Any,
    beanstalk_client: Any, beanstalk_tube: str,
) -> None:
    first = beanstalk_client.put(b"one")
    second = beanstalk_client.put(b"two")
    for _ in range(2):
        beanstalk_client.bury(beanstalk_client.reserve(5))
    site = dashboard([beanstalk_server.url], allow_actions=True)

    browser.get(f"{site.url}/s/0/failed?group={beanstalk_tube}")
    assert by_css(browser, f'tr[data-group="{beanstalk_tube}"] td.num')[0].text == "2"
    job_form = f'section.failed-job[data-job="{first}"]'
    click(browser, f'{job_form} button[data-verb="kick-job"]')
    shown(browser, f"kicked job {first}")  # the flash of the page the action led back to
    assert beanstalk_client.stats_job(first)["state"] == "ready"

    # Delete asks first: dismissed, nothing happens; accepted, the job is gone.
    browser.get(f"{site.url}/s/0/failed?group={beanstalk_tube}")
    click(browser, f'section.failed-job[data-job="{second}"] button[data-verb="delete"]',
          accept=False)
    assert beanstalk_client.stats_job(second)["state"] == "buried"
    click(browser, f'section.failed-job[data-job="{second}"] button[data-verb="delete"]',
          accept=True)
    shown(browser, f"deleted job {second}")
    from beanstalk_client import NotFound

    with pytest.raises(NotFound):
        beanstalk_client.stats_job(second)


def test_pause_a_tube_from_its_page(
    dashboard: Callable[..., Dashboard], browser: Any, beanstalk_server: Any,
    beanstalk_client: Any, beanstalk_tube: str,
) -> None:
    beanstalk_client.put(b"x")
    site = dashboard([beanstalk_server.url], allow_actions=True)
    browser.get(f"{site.url}/s/0/queue?name={beanstalk_tube}")
    click(browser, 'button[data-verb="pause"]')
    shown(browser, f"paused tube {beanstalk_tube} for 60 s")
    assert beanstalk_client.stats_tube(beanstalk_tube)["pause"] == 60


def test_retry_unfail_and_cancel_failed_qless_jobs(
    dashboard: Callable[..., Dashboard], browser: Any, redis_server: Any, qless_client: Any,
    qless_queue: str,
) -> None:
    queue = qless_client.queue(qless_queue)
    jids = [queue.put("app.Job", {"n": n}) for n in range(4)]
    for job in queue.pop(4):
        job.fail("app.Timeout", "too slow")
    site = dashboard([redis_server.url], allow_actions=True)

    browser.get(f"{site.url}/s/0/failed?group=app.Timeout")
    click(browser, f'section.failed-job[data-job="{jids[0]}"] button[data-verb="retry"]')
    shown(browser, f"put job {jids[0]} back into {qless_queue}")
    assert qless_client.get(jids[0]).state == "waiting"

    browser.get(f"{site.url}/s/0/failed?group=app.Timeout")
    click(browser, f'section.failed-job[data-job="{jids[1]}"] button[data-verb="cancel"]',
          accept=True)
    shown(browser, f"cancelled job {jids[1]}")
    assert qless_client.get(jids[1]) is None

    browser.get(f"{site.url}/s/0/failed")
    click(browser, 'tr[data-group="app.Timeout"] button[data-verb="unfail"]')
    shown(browser, "put 2 jobs of app.Timeout back into their queues")
    assert [qless_client.get(j).state for j in jids[2:]] == ["waiting", "waiting"]
    assert qless_client.failed() == {}


def test_actions_are_absent_and_refused_without_allow_actions(
    dashboard: Callable[..., Dashboard], browser: Any, beanstalk_server: Any,
    beanstalk_client: Any, beanstalk_tube: str,
) -> None:
    job = beanstalk_client.put(b"x")
    beanstalk_client.bury(beanstalk_client.reserve(5))
    site = dashboard([beanstalk_server.url])
    browser.get(f"{site.url}/s/0/failed?group={beanstalk_tube}")
    shown(browser, "read-only")
    assert by_css(browser, "section.failed-job") and not by_css(browser, "form.action")
    status, body = site.post("/s/0/action", f"verb=kick-job&job={job}&csrf=anything")
    assert (status, "actions are off" in body) == (403, True)
    assert beanstalk_client.stats_job(job)["state"] == "buried"


def test_a_post_without_the_csrf_token_is_refused(
    dashboard: Callable[..., Dashboard], browser: Any, beanstalk_server: Any,
    beanstalk_client: Any, beanstalk_tube: str,
) -> None:
    job = beanstalk_client.put(b"x")
    beanstalk_client.bury(beanstalk_client.reserve(5))
    site = dashboard([beanstalk_server.url], allow_actions=True)
    assert site.post("/s/0/action", f"verb=kick-job&job={job}")[0] == 403
    assert site.post("/s/0/action", f"verb=kick-job&job={job}&csrf=forged")[0] == 403
    # The same forgery from a page's script (what a CSRF would send) is refused as well.
    browser.get(site.url + "/")
    status = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch('/s/0/action', {method: 'POST', headers: {'Content-Type': "
        "'application/x-www-form-urlencoded'}, body: 'verb=kick-job&job=' + arguments[0]})"
        ".then(r => done(r.status));", job)
    assert status == 403
    assert beanstalk_client.stats_job(job)["state"] == "buried"
    # With the page's token it goes through.
    token = by_css_value(browser, site, job)
    assert site.post("/s/0/action", f"verb=kick-job&job={job}&csrf={token}")[0] == 303
    assert beanstalk_client.stats_job(job)["state"] == "ready"


def by_css_value(browser: Any, site: Dashboard, job: int) -> str:
    browser.get(f"{site.url}/s/0/job?id={job}")
    return str(by_css(browser, 'input[name="csrf"]')[0].get_attribute("value"))


# -- access ---------------------------------------------------------------------------------------


def test_basic_auth_is_required_when_set(
    dashboard: Callable[..., Dashboard], beanstalk_server: Any, beanstalk_client: Any,
    beanstalk_tube: str,
) -> None:
    beanstalk_client.put(b"x")
    site = dashboard([beanstalk_server.url], basic_auth=("admin", "s3cret"))
    for path in ("/", "/s/0/overview", "/static/htmx.min.js"):
        status, _ = site.get(path)
        assert status == 401
    assert site.get("/", basic("admin", "wrong"))[0] == 401
    assert site.get("/", basic("admin", "s3cret"))[0] == 200

    driver = new_browser()
    try:
        driver.get(site.url + "/")
        assert "jobwire dashboard" not in text_of(driver)
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd("Network.setExtraHTTPHeaders",
                               {"headers": basic("admin", "s3cret")})
        driver.get(site.url + "/")
        wait_cell(driver, 0, beanstalk_tube, "ready", "1")  # the live requests pass too
    finally:
        driver.quit()


def test_a_foreign_host_name_is_refused(
    dashboard: Callable[..., Dashboard], beanstalk_server: Any,
) -> None:
    site = dashboard([beanstalk_server.url], allowed_hosts=["127.0.0.1", "localhost"])
    assert site.get("/")[0] == 200
    assert site.get("/", {"Host": "rebound.example:80"})[0] == 400


# -- the command ----------------------------------------------------------------------------------


def test_the_command_serves_with_auth_from_the_environment_and_hides_passwords(
    beanstalk_server: Any, redis_server: Any,
) -> None:
    port = free_port()
    secret_url = redis_server.url.replace("redis://", "redis://:hunter2@")
    env = {**os.environ, "JOBWIRE_DASHBOARD_AUTH": "me:pw"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobwire", "dashboard", "--url", beanstalk_server.url,
         "--url", secret_url, "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        site = Dashboard(f"http://127.0.0.1:{port}", None, None)  # type: ignore[arg-type]
        wait_until(lambda: site.get("/")[0] == 401, 30, "the dashboard asking for auth",
                   ignoring=(OSError,))
        status, page = site.get("/", basic("me", "pw"))
        assert status == 200 and "redis://:***@" in page and "hunter2" not in page
        _, fragment = site.get("/s/1/overview", basic("me", "pw"))
        assert "hunter2" not in fragment  # the server refuses the password: said without it
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
    assert b"hunter2" not in out + err and b"pw" not in out


def test_the_command_without_the_web_extra_says_how_to_install_it() -> None:
    code = ("import sys\n"
            "sys.modules['uvicorn'] = None\n"
            "from jobwire.cli import main\n"
            "sys.argv = ['jobwire', 'dashboard', '--url', 'beanstalk://127.0.0.1']\n"
            "main()\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2, done.stderr
    assert "pip install 'jobwire[web]'" in done.stderr and "Traceback" not in done.stderr


def test_an_address_of_no_system_is_a_usage_error_without_its_password() -> None:
    for url in ("memcached://:pw@127.0.0.1", "beanstalk://127.0.0.1:70000",
                "redis://:pw@127.0.0.1/notadb"):
        done = subprocess.run([sys.executable, "-m", "jobwire", "dashboard", "--url", url],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("jobwire: error: InvalidAddress: "), done.stderr
        assert ":pw@" not in done.stderr and len(done.stderr.splitlines()) == 1


# -- screenshots for the docs ---------------------------------------------------------------------


def test_screenshots(
    dashboard: Callable[..., Dashboard], tmp_path: Path, servers: list[str],
    beanstalk_server: Any, gearman_client: Any, workq_client: Any, qless_client: Any,
) -> None:
    """The docs' pictures (docs/img/dashboard-*.png), taken from a real run; written into
    docs/img/ when JOBWIRE_DASHBOARD_SCREENSHOTS=1, else into a temporary folder."""
    from beanstalk_client import Client

    with Client(beanstalk_server.url) as client:
        client.use("emails")
        client.watch("emails")
        client.put_many([b'{"to": "a@example.com"}'] * 5)
        client.bury(client.reserve(5))
    for n in range(3):
        gearman_client.submit_background("resize_image", b"%d" % n)
    workq_client.add_many("thumbnails", [b"thumbnail 1", b"thumbnail 2"], ttl=600)
    queue = qless_client.queue("reports")
    queue.put_many([("app.SendReport", {"report": n}) for n in range(12)])
    for n, job in enumerate(queue.pop(6)):
        if n % 2:
            job.fail("app.SMTPError", f"connection refused by mail server {n}")
        else:
            job.complete()
    site = dashboard(servers, allow_actions=True)
    folder = ROOT / "docs" / "img" if os.environ.get("JOBWIRE_DASHBOARD_SCREENSHOTS") == "1" \
        else tmp_path
    driver = new_browser()

    def overview() -> None:  # two polls in: the rates are shown
        wait_until(lambda: cell(driver, 3, "reports", "popped/s") not in ("", "-"), 30,
                   "a rate on the page", ignoring=(WebDriverException,))

    try:
        driver.set_window_size(1200, 980)
        shots = {
            "dashboard-overview.png": ("/", overview),
            "dashboard-queue.png": ("/s/3/queue?name=reports",
                                    lambda: shown(driver, "wait time today")),
            "dashboard-failed.png": ("/s/3/failed?group=app.SMTPError",
                                     lambda: shown(driver, "connection refused")),
        }
        for name, (path, ready) in shots.items():
            driver.get(site.url + path)
            ready()
            driver.save_screenshot(str(folder / name))
            assert (folder / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        driver.quit()

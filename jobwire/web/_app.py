"""The dashboard's Starlette application: routes, the guard (allowed hosts, basic auth, security
headers), CSRF tokens, rates and flash messages."""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qsl, urlencode

import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jobwire._url import redact
from jobwire.errors import JobwireConnectionError, JobwireError, OperationTimeout

from . import _charts
from ._sources import ActionError, Source, source_for
from ._views import Overview

#: Seconds of samples the rates are computed over.
RATE_WINDOW = 10.0
#: Flash messages kept for the page a redirect leads to.
FLASHES = 64

_HEADERS = [
    (b"content-security-policy", b"default-src 'self'; img-src 'self' data:; style-src 'self'; "
     b"frame-ancestors 'none'; form-action 'self'; base-uri 'none'"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]


class Guard:
    """ASGI middleware in front of everything: refuses a Host header that is not allowed
    (400: a DNS-rebinding page cannot reach a dashboard on 127.0.0.1), asks for basic auth
    when set (401), and adds the security headers to every response."""

    def __init__(self, app: ASGIApp, allowed_hosts: Sequence[str] | None,
                 basic_auth: tuple[str, str] | None) -> None:
        self.app = app
        self.allowed = None if allowed_hosts is None else {h.lower() for h in allowed_hosts}
        self.auth = basic_auth

    @staticmethod
    def _host(value: str) -> str:
        if value.startswith("["):
            return value[1:value.find("]")].lower()
        return value.rpartition(":")[0].lower() if value.count(":") == 1 else value.lower()

    def _authorized(self, header: str) -> bool:
        assert self.auth is not None
        scheme, _, encoded = header.partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            user, _, password = base64.b64decode(encoded, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        ok_user = hmac.compare_digest(user.encode(), self.auth[0].encode())
        return hmac.compare_digest(password.encode(), self.auth[1].encode()) and ok_user

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], *_HEADERS]
            await send(message)

        if self.allowed is not None and self._host(headers.get("host", "")) not in self.allowed:
            await PlainTextResponse("host not allowed", 400)(scope, receive, secured)
        elif self.auth is not None and not self._authorized(headers.get("authorization", "")):
            await PlainTextResponse("authentication required", 401, headers={
                "WWW-Authenticate": 'Basic realm="jobwire dashboard", charset="UTF-8"'})(
                scope, receive, secured)
        else:
            await self.app(scope, receive, secured)


class Rates:
    """Per-second changes of each row's counters, over the samples of the last
    :data:`RATE_WINDOW` seconds (whoever asked for them: every open page adds samples)."""

    def __init__(self) -> None:
        self._samples: deque[tuple[float, dict[str, dict[str, int]]]] = deque()

    def add(self, overview: Overview) -> dict[str, dict[str, float | None]]:
        now = time.monotonic()
        while self._samples and now - self._samples[0][0] > RATE_WINDOW:
            self._samples.popleft()
        first = self._samples[0] if self._samples else None
        self._samples.append((now, overview.rows))
        rates: dict[str, dict[str, float | None]] = {}
        for name, row in overview.rows.items():
            rates[name] = {}
            for column in overview.columns:
                if not column.rate:
                    continue
                before = first[1].get(name) if first is not None else None
                elapsed = now - first[0] if first is not None else 0.0
                rates[name][column.key] = (
                    None if before is None or elapsed < 0.5
                    else (row.get(column.key, 0) - before.get(column.key, 0)) / elapsed)
        return rates


def _next_url(value: str | None) -> str:
    """Where to go after an action: a path of this site only."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    return value


def create_app(
    urls: Sequence[str], *, allow_actions: bool = False,
    basic_auth: tuple[str, str] | None = None, allowed_hosts: Sequence[str] | None = None,
    refresh: float = 2.0,
) -> Starlette:
    """The dashboard over the servers of ``urls`` (see ``jobwire.web``)."""
    sources = [source_for(url) for url in urls]
    token = secrets.token_urlsafe(32)
    rates = [Rates() for _ in sources]
    flashes: OrderedDict[str, str] = OrderedDict()
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("jobwire.web", "templates"), autoescape=True,
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
    )
    env.globals.update(csrf=token, allow_actions=allow_actions, refresh=refresh,
                       sources=sources, bars=_charts.bars, histogram=_charts.histogram)

    def render(name: str, request: Request, status: int = 200, **context: Any) -> HTMLResponse:
        flash = flashes.get(request.query_params.get("flash", ""))
        return HTMLResponse(env.get_template(name).render(request=request, flash=flash,
                                                          **context), status)

    def source(request: Request) -> tuple[int, Source]:
        index = request.path_params["index"]
        if not 0 <= index < len(sources):
            raise LookupError(f"no server {index}")
        return index, sources[index]

    def page(handler: Callable[[Request], Awaitable[Response]]) -> Callable[
            [Request], Awaitable[Response]]:
        """Server errors as pages: cannot reach (502), not found (404), refused (409)."""
        async def run(request: Request) -> Response:
            try:
                return await handler(request)
            except (JobwireConnectionError, OperationTimeout, OSError) as exc:
                status, message = 502, f"cannot reach the server: {exc}"
            except LookupError as exc:
                status, message = 404, str(exc)
            except JobwireError as exc:
                status, message = 409, f"{type(exc).__name__}: {exc}"
            return render("error.html", request, status, message=redact(message))
        return run

    async def overview_page(request: Request) -> Response:
        return render("overview.html", request)

    def fragment_context(index: int, overview: Overview | None, error: str | None) -> Any:
        return {"index": index, "source": sources[index], "overview": overview,
                "rates": rates[index].add(overview) if overview is not None else {},
                "error": error}

    async def overview_fragment(request: Request) -> Response:
        index, src = source(request)
        try:
            overview, error = await src.overview(), None
        except (JobwireError, OSError) as exc:
            overview, error = None, redact(f"{type(exc).__name__}: {exc}")
        return render("_overview.html", request, **fragment_context(index, overview, error))

    def _offset(request: Request) -> int:
        value = request.query_params.get("offset", "0")
        return int(value) if value.isdigit() else 0

    async def queue_page(request: Request) -> Response:
        index, src = source(request)
        name = request.query_params.get("name", "")
        view = await src.queue(name, request.query_params.get("state"), _offset(request))
        template = "_queue_summary.html" if request.url.path.endswith("/summary") else "queue.html"
        return render(template, request, index=index, source=src, view=view)

    async def job_page(request: Request) -> Response:
        index, src = source(request)
        job_id = request.query_params.get("id", "").strip()
        view = await src.job(job_id) if job_id else None
        if view is None:
            raise LookupError(f"no job {job_id!r} on {src.label}")
        return render("job.html", request, index=index, source=src, job=view)

    async def failed_page(request: Request) -> Response:
        index, src = source(request)
        view = await src.failed(request.query_params.get("group") or None, _offset(request))
        return render("failed.html", request, index=index, source=src, view=view)

    async def action(request: Request) -> Response:
        _, src = source(request)
        if not allow_actions:
            return PlainTextResponse("actions are off: start the dashboard with "
                                     "--allow-actions", 403)
        form = dict(parse_qsl((await request.body()).decode("utf-8", "replace")))
        sent = form.pop("csrf", "") or request.headers.get("x-csrf-token", "")
        if not hmac.compare_digest(sent.encode(), token.encode()):
            return PlainTextResponse("missing or wrong CSRF token", 403)
        try:
            message = await src.act(form.pop("verb", ""), form)
        except ActionError as exc:
            message = f"refused: {exc}"
        except (JobwireError, OSError) as exc:
            message = redact(f"the server refused: {type(exc).__name__}: {exc}")
        key = secrets.token_urlsafe(8)
        flashes[key] = message
        while len(flashes) > FLASHES:
            flashes.popitem(last=False)
        target = _next_url(form.get("next"))
        target += ("&" if "?" in target else "?") + urlencode({"flash": key})
        if request.headers.get("hx-request"):
            return Response(status_code=200, headers={"HX-Redirect": target})
        return RedirectResponse(target, 303)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        for src in sources:
            await src.aclose()

    from importlib.resources import files

    static = StaticFiles(directory=str(files("jobwire.web") / "static"))
    routes = [
        Route("/", page(overview_page)),
        Route("/s/{index:int}/overview", page(overview_fragment)),
        Route("/s/{index:int}/queue", page(queue_page)),
        Route("/s/{index:int}/queue/summary", page(queue_page)),
        Route("/s/{index:int}/job", page(job_page)),
        Route("/s/{index:int}/failed", page(failed_page)),
        Route("/s/{index:int}/action", page(action), methods=["POST"]),
        Mount("/static", static, name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.add_middleware(Guard, allowed_hosts=allowed_hosts, basic_auth=basic_auth)
    return app

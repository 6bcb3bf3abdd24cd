"""The web dashboard (extra ``jobwire[web]``: Starlette, Jinja2, uvicorn): one page over
beanstalkd, Gearman, Workq and qless servers. ``jobwire dashboard --url ...`` serves it; this
package builds the ASGI application for any other server.

Pages: an overview of each server (its tubes, functions or queues with their counts and rates,
refreshed live by htmx polling), a page per queue (its numbers, charts drawn as SVG on the
server, a page of its jobs where the server can list them), a page per job (body, state, qless
history) and the failed (buried) jobs, grouped as qless groups them. Actions (kick, delete,
retry, unfail, cancel, pause) are POSTs that carry a CSRF token; they are refused unless
``allow_actions`` is true. htmx is served from the package (``static/htmx.min.js``): the page
needs no network.

Only the protocol packages' public async clients are used, one connection per server, opened on
first use and opened anew after it breaks.
"""

from __future__ import annotations

from ._app import create_app
from ._sources import Source, source_for

__all__ = ["Source", "create_app", "source_for"]

"""The ``jobwire`` command: the root group, the options every command shares, output and exit
codes. Each system's commands live in their own module (``_beanstalk``, ``_gearman``,
``_workq``, ``_qless``, ``_serve``) and are added to the root group here.

Exit codes (documented in docs/cli.md):

- 0: done.
- 1: the server said no (a job not found, a refused command, an error reply), a job failed
  or its result did not come within ``--wait`` ("timed out"), or a confirmation was declined.
- 2: usage: a bad option, argument or address (click's own usage errors and jobwire's
  ``LocalProtocolError``).
- 3: cannot connect: the connection could not be opened, broke, or the server did not answer
  in time.

Errors are printed as one line on stderr (``jobwire: error: ...``); ``--debug`` adds the
traceback.
"""

from __future__ import annotations

import base64
import json
import os
import stat
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import IO, Any, TypeVar

import click
from rich.console import Console
from rich.table import Table

from jobwire._url import redact
from jobwire.errors import (
    JobwireConnectionError,
    JobwireError,
    LocalProtocolError,
    OperationTimeout,
)

OK = 0
SERVER_SAID_NO = 1
USAGE = 2
CANNOT_CONNECT = 3

F = TypeVar("F", bound=Callable[..., Any])
W = TypeVar("W")

_state = {"debug": False, "json": False}


def _set_flag(name: str) -> Callable[[click.Context, click.Parameter, bool], None]:
    def callback(ctx: click.Context, param: click.Parameter, value: bool) -> None:
        if value:
            _state[name] = True

    return callback


def shared_flags(f: F) -> F:
    """``--json`` and ``--debug``, accepted on the root group and on every command."""
    f = click.option(
        "--debug", is_flag=True, expose_value=False, is_eager=True,
        callback=_set_flag("debug"), help="Show the traceback of an error.",
    )(f)
    f = click.option(
        "--json", "json_", is_flag=True, expose_value=False, is_eager=True,
        callback=_set_flag("json"), help="Print JSON (for scripts) instead of tables.",
    )(f)
    return f


#: The TLS flags given (``tls``, ``tls_ca``, ``tls_cert``, ``tls_key``): see
#: :func:`tls_options`.
_tls: dict[str, Any] = {}


def _set_tls(name: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value:
            _tls[name] = value

    return callback


def tls_flags(f: F) -> F:
    """``--tls``, ``--tls-ca``, ``--tls-cert`` and ``--tls-key``: how every command of a system
    connects (:func:`tls_options` turns them into the client's ``ssl=``)."""
    path = click.Path(exists=True, dir_okay=False)
    for flags, kind, text in reversed([
        (("--tls",), None, "Connect with TLS (the server's certificate is checked against the "
         "system's CAs, or --tls-ca)."),
        (("--tls-ca",), path, "Trust the CAs in this PEM file for the server's certificate "
         "(implies --tls)."),
        (("--tls-cert",), path, "Present this PEM client certificate (mutual TLS; implies "
         "--tls)."),
        (("--tls-key",), path, "The PEM private key of --tls-cert (default: in --tls-cert)."),
    ]):
        name = flags[0][2:].replace("-", "_")
        if kind is None:
            f = click.option(*flags, is_flag=True, expose_value=False,
                             callback=_set_tls(name), help=text)(f)
        else:
            f = click.option(*flags, type=kind, metavar="FILE", expose_value=False,
                             callback=_set_tls(name), help=text)(f)
    return f


def tls_options() -> dict[str, Any]:
    """The ``ssl=`` keyword for a client from the TLS flags: ``{}`` when none was given (the
    address decides: ``rediss://`` is TLS), else a verifying context that trusts ``--tls-ca``
    (or the system's CAs) and presents ``--tls-cert``/``--tls-key``.

    Raises:
        click.UsageError: ``--tls-key`` without ``--tls-cert``, or a file holds no usable
            certificate or key (exit 2).
    """
    if not _tls:
        return {}
    import ssl

    if "tls_key" in _tls and "tls_cert" not in _tls:
        raise click.UsageError("--tls-key needs --tls-cert")
    try:
        context = ssl.create_default_context(cafile=_tls.get("tls_ca"))
        if "tls_cert" in _tls:
            context.load_cert_chain(_tls["tls_cert"], _tls.get("tls_key"))
    except (OSError, ssl.SSLError) as exc:
        raise click.UsageError(f"cannot load the TLS files: {exc}") from exc
    return {"ssl": context}


def url_option(envvar: str, default: str, what: str) -> Callable[[F], F]:
    """``--url`` with the system's environment default (``BEANSTALK_URL``, ...), the TLS
    flags and the shared flags: apply to every command of a system."""

    def decorate(f: F) -> F:
        f = tls_flags(f)
        f = click.option(
            "--url", envvar=envvar, default=default, show_default=True, show_envvar=True,
            help=f"The {what} (any address form jobwire takes).",
        )(f)
        return shared_flags(f)

    return decorate


# -- output ---------------------------------------------------------------------------------


#: The width of a console that is not a terminal (a pipe, a file): wide enough that no table
#: is cut (rich would shorten names to ``na…`` at 80 columns, or at ``$COLUMNS``).
PIPE_WIDTH = 1 << 14


def console(stderr: bool = False) -> Console:
    """A rich console on stdout (or stderr); no colours when not a terminal, and then no
    width limit either (:data:`PIPE_WIDTH`): output for a pipe or a file is never cut."""
    stream = sys.stderr if stderr else sys.stdout
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError):  # closed or replaced
        terminal = False
    return Console(stderr=stderr, highlight=False, soft_wrap=False,
                   width=None if terminal else PIPE_WIDTH)


def json_mode() -> bool:
    """Whether ``--json`` was given."""
    return _state["json"]


def body_text(body: bytes, limit: int | None = None) -> str:
    """A job body for a terminal, safely: UTF-8 text with control characters escaped
    (``\\n``, ``\\x1b``) so a body cannot move the cursor or clear the screen; anything not
    UTF-8 as a ``repr``-like byte string. ``limit`` cuts long bodies with ``...``."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        shown = repr(body if limit is None else body[:limit])
        return shown + ("..." if limit is not None and len(body) > limit else "")
    out = []
    for ch in text if limit is None else text[:limit]:
        code = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif code < 0x20 or code == 0x7F or 0x80 <= code < 0xA0:
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch, f"\\x{code:02x}"))
        else:
            out.append(ch)
    return "".join(out) + ("..." if limit is not None and len(text) > limit else "")


def body_json(body: bytes) -> dict[str, str]:
    """A body for ``--json``: ``{"body": text}`` when it is UTF-8, else
    ``{"body_base64": ...}``."""
    try:
        return {"body": body.decode("utf-8")}
    except UnicodeDecodeError:
        return {"body_base64": base64.b64encode(body).decode("ascii")}


def cell(text: str) -> str:
    """``text`` (a :func:`body_text`, a name) for a rich table: :func:`rows_table`,
    :func:`kv_table`, table titles and ``run_top`` rows read rich markup, so a server's
    ``[red]`` or ``[/]`` would be styled or would crash the print. Escaped, it shows as is."""
    from rich.markup import escape

    return escape(text)


def numbered_lines(stream: IO[bytes], batch: int) -> Iterator[list[tuple[int, bytes]]]:
    """The non-empty lines of ``stream`` (one job each: without their ``\\n`` or ``\\r\\n``,
    blank lines skipped) as ``(line number, line)``, in lists of ``batch``; one at a time
    when ``stream`` is a terminal, so that each line goes out as it is typed."""
    size = 1 if stream.isatty() else batch
    out: list[tuple[int, bytes]] = []
    for number, raw in enumerate(stream, 1):
        line = raw[:-1] if raw.endswith(b"\n") else raw
        line = line[:-1] if line.endswith(b"\r") else line
        if line:
            out.append((number, line))
            if len(out) >= size:
                yield out
                out = []
    if out:
        yield out


def remaining_bytes(stream: IO[bytes]) -> int | None:
    """How much of ``stream`` is left to read when it is a regular file (``< file``), for a
    progress bar; ``None`` for a pipe or a terminal."""
    try:
        info = os.fstat(stream.fileno())
        if stat.S_ISREG(info.st_mode):
            return max(0, info.st_size - os.lseek(stream.fileno(), 0, os.SEEK_CUR))
    except (OSError, ValueError):
        pass
    return None


def _default(value: Any) -> Any:
    if isinstance(value, bytes):
        return body_json(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if hasattr(value, "__dataclass_fields__"):
        return {k: getattr(value, k) for k in value.__dataclass_fields__}
    return str(value)


def print_json(data: Any) -> None:
    """Print ``data`` as one JSON document (bytes as in :func:`body_json`)."""
    click.echo(json.dumps(data, default=_default, ensure_ascii=False))


def show(data: Any, *, table: Callable[[], Table] | None = None, text: str | None = None) -> None:
    """Print a result: JSON under ``--json``; else the rich ``table()``, else ``text``, else
    the data as key/value lines."""
    if json_mode():
        print_json(data)
    elif table is not None:
        console().print(table())
    elif text is not None:
        click.echo(text)
    elif isinstance(data, Mapping):
        console().print(kv_table(data))
    else:
        click.echo(str(data))


def kv_table(data: Mapping[str, Any], title: str | None = None) -> Table:
    """Two columns, one row per key (stats)."""
    table = Table(title=title, show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    for key, value in data.items():
        table.add_row(str(key), str(value))
    return table


def rows_table(
    columns: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None
) -> Table:
    """A table with a header; numbers right-aligned when the first row's cell is a number."""
    rows = [list(r) for r in rows]
    table = Table(title=title)
    for i, column in enumerate(columns):
        numeric = bool(rows) and isinstance(rows[0][i], (int, float))
        table.add_column(column, justify="right" if numeric else "left")
    for row in rows:
        table.add_row(*(str(cell) for cell in row))
    return table


# -- errors ---------------------------------------------------------------------------------


class Failed(Exception):
    """Raise from a command to end it with a one-line message and an exit code."""

    def __init__(self, message: str, code: int = SERVER_SAID_NO) -> None:
        super().__init__(message)
        self.code = code


def wait_or_alias(wait: W, alias: W | None) -> W:
    """``--wait``, or its hidden old name ``--timeout`` when that was given instead (both, with
    two values: a usage error)."""
    if alias is None:
        return wait
    given = click.get_current_context().get_parameter_source("wait")
    if given not in (None, click.core.ParameterSource.DEFAULT) and wait != alias:
        raise click.UsageError("--timeout is the old name of --wait: give one of them")
    return alias


def exit_code(exc: BaseException) -> int:
    """The exit code for an exception a command raised (see the module docstring)."""
    if isinstance(exc, Failed):
        return exc.code
    if isinstance(exc, (JobwireConnectionError, OperationTimeout, ConnectionError, TimeoutError)):
        return CANNOT_CONNECT
    if isinstance(exc, OSError):
        return CANNOT_CONNECT
    if isinstance(exc, (LocalProtocolError, click.UsageError)):
        return USAGE
    if isinstance(exc, JobwireError):
        return SERVER_SAID_NO
    if isinstance(exc, (ValueError, TypeError)):
        return USAGE
    return SERVER_SAID_NO


def _one_line(exc: BaseException) -> str:
    text = redact(" ".join(str(exc).split())) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if not isinstance(exc, Failed) else text


# -- the root group -------------------------------------------------------------------------


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="jobwire", prog_name="jobwire")
@shared_flags
def cli() -> None:
    """Look at and drive beanstalkd, Gearman, Workq and qless servers, and run the bundled
    servers.

    Every command takes --url (default from BEANSTALK_URL, GEARMAN_SERVERS, WORKQ_URL or
    QLESS_URL), --json for scripts and --debug for tracebacks. Exit codes: 0 ok, 1 the
    server said no (or a job failed, or timed out), 2 usage, 3 cannot connect.
    """


def _register() -> None:
    from jobwire.cli import _beanstalk, _gearman, _qless, _serve, _worker, _workq

    for module in (_serve, _beanstalk, _gearman, _workq, _qless, _worker):
        cli.add_command(module.group)
    from jobwire.cli._dashboard import command as dashboard  # extra web: checked when run
    cli.add_command(dashboard)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line and exit with its code (see the module docstring)."""
    _state.update(debug=False, json=False)
    _tls.clear()
    _register()
    try:
        returned = cli.main(args=list(argv) if argv is not None else None, prog_name="jobwire",
                            standalone_mode=False)
    except click.Abort:
        click.echo("jobwire: aborted", err=True)
        sys.exit(SERVER_SAID_NO)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:
        if _state["debug"]:
            click.echo(redact("".join(traceback.format_exception(exc))).rstrip(), err=True)
        click.echo(f"jobwire: error: {_one_line(exc)}", err=True)
        sys.exit(exit_code(exc))
    # --help and --version return 0; a command may return its own exit code.
    sys.exit(returned if isinstance(returned, int) else OK)

"""The bundled servers' command lines (``jobwire._listen.ServerParser``): read without argparse
(about 4 ms of a server's start, issue 18), with argparse's results, help and errors.

Every flag of each server, in each of its spellings, is read as argparse reads it (the parser
hands argparse the same flags for help, errors and rare spellings); ``--help``, an unknown flag,
a missing or a bad value end the process as argparse does (``prog: error: ...``, status 2).
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Callable

import pytest

from jobwire._listen import SUPPRESS, ServerParser, byte_size

MODULES = ("beanstalk_client.server", "gearman_client.server", "workq_client.server")


def _build(module: str) -> Callable[[], ServerParser]:
    builder: Callable[[], ServerParser] = importlib.import_module(f"{module}.__main__")._parser
    return builder


def _value(flag: object) -> str:
    """A valid value for a flag that takes one."""
    kind: object = getattr(flag, "type", None)
    values: dict[object, str] = {int: "7", float: "1.5", byte_size: "64k"}
    return values.get(kind, "some-value")


def _command_lines(parser: ServerParser) -> list[list[str]]:
    """Each spelling of each flag, once on its own (with a value, also as ``flag=value``)."""
    lines = []
    for flag in parser._flags:
        for name in flag.flags:
            if flag.action == "store":
                lines += [[name, _value(flag)], [f"{name}={_value(flag)}"]]
            else:
                lines.append([name])
    return lines


@pytest.mark.parametrize("module", MODULES)
def test_each_flag_reads_as_argparse_reads_it(module: str) -> None:
    parser = _build(module)()
    reference = parser.argparse_parser()
    lines = _command_lines(parser)
    assert len(lines) > 10
    everything = [arg for line in lines for arg in line]
    for argv in [*lines, [], everything]:
        own = parser._read(list(argv))
        assert own is not None, argv  # read without argparse
        assert own == vars(reference.parse_args(argv)), argv
        assert vars(parser.parse_args(argv)) == own


@pytest.mark.parametrize("module", MODULES)
def test_rare_spellings_are_argparse_s(module: str, capsys: pytest.CaptureFixture[str]) -> None:
    """What the parser does not read itself (an abbreviated flag, a value that begins with
    ``-``, repeated short flags) argparse reads, with the same result."""
    parser = _build(module)()
    reference = parser.argparse_parser()
    for argv in (["--max-conn", "3"], ["--idle-timeout", "-1"], ["-c3"]):
        assert parser._read(argv) is None
        assert vars(parser.parse_args(argv)) == vars(reference.parse_args(argv))
    if module == "beanstalk_client.server":
        assert parser.parse_args(["-VV", "-z", "-1"]).verbose == 2


@pytest.mark.parametrize("module", MODULES)
def test_help(module: str, monkeypatch: pytest.MonkeyPatch,
              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    parser = _build(module)()
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["--help"])
    assert exited.value.code == 0
    shown = capsys.readouterr().out
    assert shown == parser.format_help()
    assert shown.startswith(f"usage: python -m {module} [-h]")
    words = {word.strip("[],") for word in shown.split()}
    for flag in parser._flags:
        assert any(name in words for name in flag.flags) == (flag.help != SUPPRESS), flag.flags
        if flag.help != SUPPRESS:
            assert str(flag.help).split()[0] in shown
    with pytest.raises(SystemExit):
        parser.parse_args(["-h"])
    assert capsys.readouterr().out == shown


@pytest.mark.parametrize(
    ("module", "argv", "error"),
    [
        ("beanstalk_client.server", ["--bogus"], "unrecognized arguments: --bogus"),
        ("beanstalk_client.server", ["-p"], "argument -p: expected one argument"),
        ("beanstalk_client.server", ["-p", "-l", "x"], "argument -p: expected one argument"),
        ("beanstalk_client.server", ["-p", "eleven"], "argument -p: invalid int value: 'eleven'"),
        ("beanstalk_client.server", ["--max-memory=0"],
         "argument --max-memory: invalid size value: '0'"),
        ("beanstalk_client.server", ["-p", "1", "extra"], "unrecognized arguments: extra"),
        ("gearman_client.server", ["--bogus=1"], "unrecognized arguments: --bogus=1"),
        ("gearman_client.server", ["--port"], "argument -p/--port: expected one argument"),
        ("gearman_client.server", ["--allow-shutdown=yes"],
         "argument --allow-shutdown: ignored explicit argument 'yes'"),
        ("gearman_client.server", ["--idle-timeout", "soon"],
         "argument --idle-timeout: invalid float value: 'soon'"),
        ("workq_client.server", ["-bogus"], "unrecognized arguments: -bogus"),
        ("workq_client.server", ["-listen"], "argument -listen: expected one argument"),
        ("workq_client.server", ["-max-connections", "x"],
         "argument -c/--max-connections/-max-connections: invalid int value: 'x'"),
    ],
)
def test_usage_errors(module: str, argv: list[str], error: str,
                      capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        _build(module)().parse_args(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: python -m {module} [-h]")
    assert err.endswith(f"python -m {module}: error: {error}\n")


@pytest.mark.parametrize("module", MODULES)
def test_the_process_refuses_an_unknown_flag(module: str) -> None:
    """As a process: status 2, the usage and the error on stderr, nothing on stdout."""
    done = subprocess.run([sys.executable, "-m", module, "--no-such-flag"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.endswith(
        f"python -m {module}: error: unrecognized arguments: --no-such-flag\n"
    )


@pytest.mark.parametrize("module", MODULES)
def test_every_flag_is_read_without_argparse_or_typing(module: str) -> None:
    """A command line of every flag, read in a fresh process: neither argparse nor typing is
    imported (``tests/servers/test_serving.py`` checks a server's default flags the same way,
    up to its first reply)."""
    argv = [arg for line in _command_lines(_build(module)()) for arg in line]
    code = (
        "import sys\n"
        f"from {module}.__main__ import _parser\n"
        "args = _parser().parse_args(sys.argv[1:])\n"
        "print(sorted(m for m in ('argparse', 'typing') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr

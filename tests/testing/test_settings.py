"""How the plugin reads its settings: the backend syntax, precedence (command line, then the
environment, then the ini file) and usage errors for malformed values."""

from __future__ import annotations

import pytest

from jobwire.testing._backends import parse_backends

from .conftest import Inner

EVERY = ("beanstalk", "gearman", "workq", "redis")


def test_parse_backends() -> None:
    assert parse_backends("") == dict.fromkeys(EVERY, "bundled")
    assert parse_backends("binary") == dict.fromkeys(EVERY, "binary")
    assert parse_backends("workq=bundled, binary") == {
        "beanstalk": "binary", "gearman": "binary", "workq": "bundled", "redis": "binary"}
    assert parse_backends("redis=external") == {
        "beanstalk": "bundled", "gearman": "bundled", "workq": "bundled", "redis": "external"}


@pytest.mark.parametrize(("text", "message"), [
    ("docker", "'docker': the backend is one of bundled, binary, container, external"),
    ("qless=binary", "'qless=binary': the system is one of beanstalk, gearman, workq, redis"),
    ("workq=", "'workq=': the backend is one of"),
])
def test_parse_backends_refuses(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_backends(text)


SHOW = {"test_show": """
    def test_show(jobwire_settings):
        print("BACKENDS", dict(jobwire_settings.backends))
        print("URLS", dict(jobwire_settings.urls))
"""}


@pytest.mark.slow
def test_command_line_then_environment_then_ini(inner: Inner, pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\njobwire_backend = binary\n"
                     "jobwire_gearman_url = gearman://127.0.0.1:4730\n")
    from_ini = inner("-s", files=SHOW)
    from_ini.stdout.fnmatch_lines(["*BACKENDS {'beanstalk': 'binary', *",
                                   "URLS {'gearman': 'gearman://127.0.0.1:4730'}"])
    from_env = inner("-s", env={"JOBWIRE_BACKEND": "container"})
    from_env.stdout.fnmatch_lines(["*BACKENDS {'beanstalk': 'container', *"])
    from_cli = inner("-s", "--jobwire-backend=workq=external",
                     env={"JOBWIRE_BACKEND": "container"})
    from_cli.stdout.fnmatch_lines(["*BACKENDS {'beanstalk': 'bundled', 'gearman': 'bundled', "
                                   "'workq': 'external', 'redis': 'bundled'}"])


@pytest.mark.slow
@pytest.mark.parametrize(("args", "message"), [
    (["--jobwire-backend=dockerd"],
     "*--jobwire-backend / JOBWIRE_BACKEND: 'dockerd': the backend is one of bundled, binary, "
     "container, external*"),
    (["--jobwire-gearman-url=beanstalk://127.0.0.1:11300"],
     "*--jobwire-gearman-url: *expected a gearman://host:port URL*"),
    (["--jobwire-workq-url=unix:///tmp/workq.sock"],
     "*--jobwire-workq-url: *workq servers listen on TCP only*"),
    (["--jobwire-redis-url=redis://127.0.0.1:6379/x"], "*--jobwire-redis-url: *"),
])
def test_malformed_settings_are_usage_errors(inner: Inner, args: list[str], message: str) -> None:
    result = inner(*args, files=SHOW)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])

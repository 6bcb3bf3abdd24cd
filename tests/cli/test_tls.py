"""The TLS flags every ``jobwire`` command takes (``--tls``, ``--tls-ca``, ``--tls-cert``,
``--tls-key``), against the bundled servers serving mutual TLS (``--tls-client-ca``): with the
test CA's client certificate a command is served; without one it ends with exit 3 and the
``TLSError``, never a plaintext fallback."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from jobwire.testing import start_beanstalk, start_gearman, start_workq

from ..tlsrelay import Certs, make_certs
from .conftest import run_cli


@pytest.fixture(scope="module")
def certs() -> Certs:
    return make_certs()


#: system -> (start the bundled server with these flags, the command to run, what it prints)
SYSTEMS: dict[str, tuple[Callable[[list[str]], Any], list[str], str]] = {
    "beanstalk": (lambda args: start_beanstalk(args=args), ["stats"], "current-jobs-ready"),
    "gearman": (lambda args: start_gearman(extra=args), ["status"], ""),
    "workq": (lambda args: start_workq(args=args), ["inspect", "server"], ""),
}


@pytest.fixture(scope="module", params=sorted(SYSTEMS))
def mtls_server(request: pytest.FixtureRequest, certs: Certs) -> Iterator[tuple[str, int]]:
    """(system, port) of a bundled server that serves only the test CA's clients."""
    server = SYSTEMS[request.param][0](certs.mtls_args)
    yield request.param, server.port
    server.stop()


def test_cert_flags_are_served_by_a_mutual_tls_server(
    mtls_server: tuple[str, int], certs: Certs
) -> None:
    system, port = mtls_server
    command, shown = SYSTEMS[system][1:]
    url = f"localhost:{port}"
    done = run_cli(system, *command, "--url", url, "--tls-ca", certs.ca_file,
                   "--tls-cert", certs.client_file)
    assert done.returncode == 0, done.stderr
    assert shown in done.stdout
    # The certificate and its key in two files.
    key_file, cert_file = certs.client_file + ".key", certs.client_file + ".crt"
    with open(certs.client_file) as pem_file:
        pem = pem_file.read()
    split = pem.index("-----BEGIN CERTIFICATE-----")
    with open(key_file, "w") as out:
        out.write(pem[:split])
    with open(cert_file, "w") as out:
        out.write(pem[split:])
    done = run_cli(system, *command, "--url", url, "--tls-ca", certs.ca_file,
                   "--tls-cert", cert_file, "--tls-key", key_file, "--json")
    assert done.returncode == 0, done.stderr


def test_without_a_client_certificate_it_is_refused(
    mtls_server: tuple[str, int], certs: Certs
) -> None:
    system, port = mtls_server
    done = run_cli(system, *SYSTEMS[system][1], "--url", f"localhost:{port}",
                   "--tls-ca", certs.ca_file)
    assert done.returncode == 3, done.stderr
    assert "TLSError" in done.stderr and "certificate" in done.stderr, done.stderr
    done = run_cli(system, *SYSTEMS[system][1], "--url", f"localhost:{port}")  # plaintext
    assert done.returncode == 3, done.stderr


def test_tls_flag_checks_the_server_certificate(
    mtls_server: tuple[str, int], certs: Certs
) -> None:
    # --tls alone trusts the system's CAs, which do not know the test CA.
    system, port = mtls_server
    done = run_cli(system, *SYSTEMS[system][1], "--url", f"localhost:{port}", "--tls",
                   "--tls-cert", certs.client_file)
    assert done.returncode == 3, done.stderr
    assert "TLSError" in done.stderr, done.stderr


def test_bad_tls_files_are_usage_errors(certs: Certs) -> None:
    done = run_cli("beanstalk", "stats", "--tls-cert", certs.ca_file)  # a CA, no key
    assert done.returncode == 2, done.stderr
    assert "TLS files" in done.stderr
    done = run_cli("beanstalk", "stats", "--tls-key", certs.client_file)
    assert done.returncode == 2 and "--tls-key needs --tls-cert" in done.stderr

"""``scripts/_setup.sh``, which ``scripts/test`` and ``scripts/demo`` source: what it says while
it sets up, and which Debian packages ``scripts/test`` installs.

The functions run in bash as the scripts run them. What they drive is replaced by stand-ins
that record their arguments: ``python3 -m venv`` and ``pip`` (a real first install takes a
minute and the network), ``apt-get`` and ``id`` (a test installs nothing on the machine and
cannot change its own user id).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETUP = ROOT / "scripts" / "_setup.sh"


def _stand_in(path: Path, body: str) -> None:
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(0o755)


def _bash(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    bash = shutil.which("bash")
    assert bash is not None
    return subprocess.run([bash, "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=60)


def test_the_setup_says_each_step_before_it_runs(tmp_path: Path) -> None:
    """The first run of scripts/demo is a minute of pip: one line per step says so; a run with
    nothing to do says nothing."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(SETUP, tmp_path / "scripts" / "_setup.sh")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    log = tmp_path / "calls.log"
    # "python3 -m venv .venv" makes a .venv/bin/python that logs what it is asked to run.
    fake_python = tmp_path / "python3"
    _stand_in(fake_python, f'''echo "python $*" >> {log}
mkdir -p .venv/bin
cat > .venv/bin/python <<'END'
#!/bin/bash
echo "venv-python $*" >> {log}
END
chmod +x .venv/bin/python
''')
    env = {**os.environ, "PYTHON": str(fake_python)}
    script = 'source scripts/_setup.sh && jobwire_setup "."'
    first = _bash(script, tmp_path, env)
    assert first.returncode == 0, first.stderr
    lines = first.stderr.splitlines()
    assert [line.split(" ")[1] for line in lines] == ["creating", "installing", "installed"], lines
    assert all(line.startswith("setup: ") for line in lines)
    assert "(first run only)" in lines[0] and "pip" in lines[1]
    assert log.read_text().splitlines() == [
        "python -m venv .venv",
        "venv-python -m pip install -q --disable-pip-version-check -e .",
    ]
    again = _bash(script, tmp_path, env)
    assert (again.returncode, again.stderr) == (0, "")
    assert len(log.read_text().splitlines()) == 2  # nothing run again


def _install_line() -> list[str]:
    """The BINARY:PACKAGE pairs scripts/test passes to jobwire_install_debs."""
    text = (ROOT / "scripts" / "test").read_text()
    match = re.search(r"^jobwire_install_debs (.+)$", text, re.M)
    assert match is not None
    return match.group(1).split()


def _bare_path(tmp_path: Path, uid: int) -> dict[str, str]:
    """An environment whose PATH has none of the packages' binaries: only ``dirname`` (the
    setup script needs it), an ``id`` that says ``uid`` and an ``apt-get`` that logs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    dirname = shutil.which("dirname")
    assert dirname is not None
    (bin_dir / "dirname").symlink_to(dirname)
    _stand_in(bin_dir / "id", f'echo {uid}\n')
    _stand_in(bin_dir / "apt-get", f'echo "apt-get $*" >> {tmp_path / "apt.log"}\n')
    return {"PATH": str(bin_dir), "HOME": str(tmp_path)}


def test_scripts_test_installs_java_and_chromedriver_when_missing(tmp_path: Path) -> None:
    pairs = _install_line()
    assert "java:openjdk-17-jre-headless" in pairs  # the Spark tests' JVM
    assert "chromedriver:chromium-driver" in pairs  # the dashboard's Selenium tests
    assert "chromium:chromium" in pairs and "beanstalkd:beanstalkd" in pairs
    env = _bare_path(tmp_path, 0)
    done = _bash(f"source {SETUP} && jobwire_install_debs {' '.join(pairs)}", tmp_path, env)
    assert done.returncode == 0, done.stderr
    # gearmand may be found in /usr/sbin, which the function looks in beside PATH.
    wanted = [p.partition(":")[2] for p in pairs if not os.access(
        f"/usr/sbin/{p.partition(':')[0]}", os.X_OK)]
    assert (tmp_path / "apt.log").read_text().splitlines() == [
        "apt-get update -qq",
        "apt-get install -y -qq " + " ".join(wanted),
    ]
    assert done.stderr == f"setup: installing {' '.join(wanted)} with apt-get\n"


def test_not_root_warns_and_installs_nothing(tmp_path: Path) -> None:
    """Not root: a warning naming the packages; the tests needing them then skip, or fail
    under JOBWIRE_REQUIRE_REAL_SERVERS=1 (their own check, with what to install)."""
    env = _bare_path(tmp_path, 1000)
    done = _bash(f"source {SETUP} && jobwire_install_debs java:openjdk-17-jre-headless "
                 "chromedriver:chromium-driver", tmp_path, env)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("warning: openjdk-17-jre-headless chromium-driver missing "
                                  "and not root")
    assert not (tmp_path / "apt.log").exists()

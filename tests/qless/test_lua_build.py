"""The qless script is built from its sources: ``qless_client/lua/qless.lua``, the file the
package loads, is the join of ``qless_client/lua/src/NN_<concern>.lua`` made by
``scripts/build_lua.py``, every source is in it, and nothing but the shipped file is read at
run time."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import load_file

ROOT = Path(__file__).resolve().parent.parent.parent
LUA = ROOT / "qless_client" / "lua"
build_lua = load_file("build_lua", ROOT / "scripts" / "build_lua.py")


def source_names() -> list[str]:
    return sorted(p.name for p in (LUA / "src").iterdir())


def test_the_shipped_script_is_the_join_of_its_sources() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_lua.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    shipped = (LUA / "qless.lua").read_bytes().decode()
    assert shipped == build_lua.join(LUA / "src")
    assert shipped.splitlines()[0] == (
        "-- GENERATED from qless_client/lua/src/*.lua by scripts/build_lua.py: do not edit, "
        "edit those.")


def test_every_source_is_used_whole_and_in_order() -> None:
    names = source_names()
    assert len(names) > 1
    assert all(re.fullmatch(r"\d\d_[a-z][a-z_]*\.lua", name) for name in names), names
    assert len({name[:2] for name in names}) == len(names)  # one place each
    shipped = (LUA / "qless.lua").read_text()
    assert re.findall(r"^-- from src/(\S+)$", shipped, re.MULTILINE) == names
    at = 0
    for name in names:
        piece = f"-- from src/{name}\n" + (LUA / "src" / name).read_text()
        found = shipped.find(piece, at)
        assert found >= 0, f"{name} is not whole in the shipped script after the one before it"
        at = found + len(piece)
    assert shipped[at:] == ""


def test_the_package_reads_only_the_shipped_script(tmp_path: Path) -> None:
    """A copy of the package without ``lua/src`` imports and offers the same script."""
    copy = tmp_path / "qless_client"
    shutil.copytree(ROOT / "qless_client", copy,
                    ignore=shutil.ignore_patterns("src", "__pycache__"))
    assert not (copy / "lua" / "src").exists()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    code = "import qless_client._scripts as s; print(s.__file__); print(s.SHA)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    where, sha = result.stdout.split()
    assert Path(where).is_relative_to(copy)
    from qless_client._scripts import SHA, SOURCE

    assert (LUA / "qless.lua").read_bytes() == SOURCE
    assert sha == SHA


@pytest.fixture
def lua_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "lua"
    shutil.copytree(LUA, copy)
    return copy


def test_check_names_the_difference_and_a_build_repairs_it(
        lua_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = lua_copy / "src" / "02_args.lua"
    source.write_text(source.read_text().replace("local function read_options(",
                                                 "local function read_the_options("))
    assert build_lua.build(lua_copy, check=True) == 1
    err = capsys.readouterr().err
    assert f"{lua_copy / 'qless.lua'} is not the join of {lua_copy / 'src'}" in err
    assert "-local function read_options(list, first, even)" in err
    assert "+local function read_the_options(list, first, even)" in err

    assert build_lua.build(lua_copy) == 0
    assert "local function read_the_options(" in (lua_copy / "qless.lua").read_text()
    assert build_lua.build(lua_copy, check=True) == 0


@pytest.mark.parametrize(("name", "says"), [
    ("keys.lua", "keys.lua: a source is named NN_<concern>.lua"),
    ("19_notes.txt", "19_notes.txt: a source is named NN_<concern>.lua"),
    ("01_more_keys.lua", "01_more_keys.lua: place 01 is 01_keys.lua too"),
])
def test_a_source_the_join_would_not_take_is_refused(
        lua_copy: Path, capsys: pytest.CaptureFixture[str], name: str, says: str) -> None:
    (lua_copy / "src" / name).write_text("local unused = 1\n")
    before = (lua_copy / "qless.lua").read_bytes()
    assert build_lua.build(lua_copy, check=True) == 1
    assert build_lua.build(lua_copy) == 1
    assert says in capsys.readouterr().err
    assert (lua_copy / "qless.lua").read_bytes() == before

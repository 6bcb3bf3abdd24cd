"""``jobwire._record.record``: the classes of the Sans-IO cores behave as the frozen slotted
dataclasses they replace (fields, defaults, ``__post_init__``, repr, equality, hashing, match,
frozenness, pickling, copying), mypy reads them as dataclasses, and importing a core no longer
imports ``dataclasses`` (issue 18)."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

import pytest

from jobwire._record import FrozenInstanceError, field, fields, record, replace

ROOT = Path(__file__).resolve().parents[1]
T = TypeVar("T")


class Base:
    __slots__ = ()
    word: ClassVar[str] = "base"


@record
class Point(Base):
    x: int
    y: int = 0
    word: ClassVar[str] = "point"


@record
class Point3(Point):
    z: int = 0
    label: str = field(default="", compare=False)


@dataclasses.dataclass(frozen=True, slots=True)
class DataPoint(Base):
    x: int
    y: int = 0
    word: ClassVar[str] = "point"


@record
class Bag:
    name: str
    items: list[int] = field(default_factory=list)
    secret: str = field(default="", repr=False)
    made: int = field(default=7, init=False)
    count: int = field(default_factory=lambda: 1, init=False)


@record
class Checked:
    value: int
    seen: list[str] = field(default_factory=list, compare=False)

    def __post_init__(self) -> None:
        if self.value < 0:
            raise ValueError(f"negative: {self.value}")
        self.seen.append("post_init")


@record(init=False)
class HandMade:
    a: int
    b: bytes

    def __init__(self, a: int) -> None:
        _set_a(self, a)
        _set_b(self, b"made")


_set_a = HandMade.__dict__["a"].__set__
_set_b = HandMade.__dict__["b"].__set__


@record(frozen=False, eq=False)
class Mutable:
    n: int
    links: list[Mutable] = field(default_factory=list)


@record(frozen=False)
class MutableEq:
    n: int


@record
class Box(Generic[T]):
    item: T


@dataclasses.dataclass(frozen=True, slots=True)
class DataPoint3(DataPoint):
    z: int = 0
    label: str = dataclasses.field(default="", compare=False)


# -- fields, defaults, __init__ ------------------------------------------------------------------


def test_fields_come_from_annotations_after_the_record_bases_and_skip_class_vars() -> None:
    assert [f.name for f in fields(Point3)] == ["x", "y", "z", "label"]
    assert [f.type for f in fields(Point3)] == ["int", "int", "int", "str"]
    assert fields(Point3(1)) == fields(Point3)
    assert Point3.word == "point" and Point3(1).word == "point"
    assert Point3.__match_args__ == ("x", "y", "z", "label")
    assert inspect.signature(Point3) == inspect.signature(DataPoint3)


def test_a_class_var_given_as_an_object_is_skipped_too() -> None:
    namespace: dict[str, Any] = {"record": record}
    exec("import typing\n@record\nclass C:\n    a: int\n    k: typing.ClassVar[int] = 3\n",
         namespace)
    cls = namespace["C"]
    assert [f.name for f in fields(cls)] == ["a"]
    assert cls.k == 3 and cls(1).a == 1


def test_defaults_and_field_options() -> None:
    one, two = Bag("a"), Bag("b")
    assert one.items == [] and one.items is not two.items  # a new list for each
    assert (one.made, one.count, one.secret) == (7, 1, "")
    assert repr(Bag("n", [1], secret="pw")) == "Bag(name='n', items=[1], made=7, count=1)"
    assert list(inspect.signature(Bag).parameters) == ["name", "items", "secret"]
    assert Point3(1, 2, 3, "a") == Point3(1, 2, 3, "b")  # label: compare=False
    assert hash(Point3(1, 2, 3, "a")) == hash(Point3(1, 2, 3, "b"))
    with pytest.raises(TypeError):
        Bag("n", made=3)  # type: ignore[call-arg]


def test_post_init_runs_last_and_its_errors_reach_the_caller() -> None:
    assert Checked(1).seen == ["post_init"]
    with pytest.raises(ValueError, match="negative: -1"):
        Checked(-1)


def test_init_false_keeps_the_class_own_init() -> None:
    made = HandMade(3)
    assert (made.a, made.b) == (3, b"made")
    assert made == HandMade(3) and repr(made) == "HandMade(a=3, b=b'made')"


def test_classes_of_one_shape_share_their_compiled_init() -> None:
    @record
    class A:
        job_id: int

    @record
    class B:
        job_id: int

    assert A.__init__.__code__ is B.__init__.__code__
    assert A.__init__.__qualname__.endswith("A.__init__")
    assert (A(1).job_id, B(2).job_id) == (1, 2)


# -- what dataclasses gave: repr, eq, hash, match, slots ------------------------------------------


def test_repr_eq_hash_and_match_args_are_those_of_the_dataclass_it_replaces() -> None:
    for args in [(1,), (1, 2), (-5, 10**30)]:
        ours, theirs = Point(*args), DataPoint(*args)
        assert repr(ours) == repr(theirs).replace("DataPoint", "Point")
        assert hash(ours) == hash(theirs)
        assert Point.__match_args__ == DataPoint.__match_args__
    assert Point(1, 2) == Point(1, 2) and Point(1, 2) != Point(2, 1)
    assert Point(1) != Point3(1)  # another class, even a subclass, is never equal
    assert Point(1).__eq__(DataPoint(1)) is NotImplemented
    assert {Point(1), Point(1), Point(2)} == {Point(1), Point(2)}


def test_match_statements_see_the_fields() -> None:
    match Point3(1, 2, 3):
        case Point3(x, y, z=3):
            assert (x, y) == (1, 2)
        case _:
            pytest.fail("no match")


def test_a_record_is_slotted_and_a_mutable_one_unhashable_unless_eq_is_off() -> None:
    assert Point.__dict__["__slots__"] == ("x", "y")
    assert Point3.__dict__["__slots__"] == ("z", "label")  # x and y are Point's
    assert not hasattr(Point(1), "__dict__")
    mutable = MutableEq(1)
    mutable.n = 2
    assert mutable == MutableEq(2)
    with pytest.raises(TypeError, match="unhashable"):
        hash(mutable)
    with pytest.raises(AttributeError):
        mutable.other = 1  # type: ignore[attr-defined]
    node = Mutable(1)
    assert node != Mutable(1) and hash(node) == object.__hash__(node)


def test_a_cycle_through_a_mutable_record_is_shown_as_dataclasses_show_it() -> None:
    node = Mutable(1)
    node.links.append(node)
    assert repr(node) == "Mutable(n=1, links=[...])"


def test_frozen_fields_refuse_assignment_and_deletion() -> None:
    point = Point(1)
    with pytest.raises(FrozenInstanceError, match="cannot assign to field 'x'"):
        point.x = 2  # type: ignore[misc]
    with pytest.raises(AttributeError, match="cannot delete field 'y'"):
        del point.y
    with pytest.raises(FrozenInstanceError):
        point.other = 1  # type: ignore[attr-defined]
    assert point == Point(1)


def test_a_generic_record_subscripts_and_builds() -> None:
    assert Box[bytes](b"x").item == b"x"
    assert Box(1) == Box(1)


# -- pickling, copying, replace, dataclasses' own helpers ------------------------------------------


def test_frozen_records_pickle_and_copy_with_every_protocol() -> None:
    from beanstalk_client._commands import Put
    from beanstalk_client._events import Reserved
    from gearman_client._packets import SubmitJob
    from workq_client._events import Leased

    values: list[Any] = [
        Point3(1, 2, 3, "a"), Bag("n", [1]), HandMade(4), Box(b"x"),
        Put(b"body", 5), Reserved(7, b"body"), SubmitJob(b"f", b"u", b"d"),
        Leased("6c0ee421-38ac-4610-a3f6-00475b4d7605", "q", 1000, b"p"),
    ]
    for value in values:
        for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
            back = pickle.loads(pickle.dumps(value, protocol))
            assert type(back) is type(value) and back == value, (value, protocol)
        assert copy.copy(value) == value and copy.deepcopy(value) == value
    assert copy.deepcopy(Bag("n", [1])).items is not values[1].items
    mutable = pickle.loads(pickle.dumps(MutableEq(3)))
    assert mutable == MutableEq(3)


def test_replace_builds_through_init_again() -> None:
    assert replace(Point3(1, 2), z=5) == Point3(1, 2, 5)
    # __post_init__ ran again (on the list passed on, as dataclasses.replace passes it)
    assert replace(Checked(1), value=2).seen == ["post_init", "post_init"]
    with pytest.raises(ValueError, match="negative"):
        replace(Checked(1), value=-1)
    with pytest.raises(ValueError, match="init=False"):
        replace(Bag("n"), made=1)
    with pytest.raises(TypeError):
        replace(Point(1), w=1)
    with pytest.raises(TypeError, match="record"):
        replace(object())
    with pytest.raises(TypeError, match="record"):
        fields(object())


def test_dataclasses_helpers_work_on_records() -> None:
    bag = Bag("n", [1])
    assert dataclasses.is_dataclass(bag)
    assert [f.name for f in dataclasses.fields(bag)] == ["name", "items", "secret", "made",
                                                         "count"]
    assert dataclasses.asdict(Point3(1)) == {"x": 1, "y": 0, "z": 0, "label": ""}
    assert dataclasses.replace(Point(1), y=3) == Point(1, 3)


# -- mistakes are refused when the class is made --------------------------------------------------


def test_mistakes_in_a_record_class_are_refused() -> None:
    with pytest.raises(ValueError, match="mutable default"):
        @record
        class A:
            items: list[int] = []  # noqa: RUF012

    with pytest.raises(TypeError, match="non-default argument 'b'"):
        @record
        class B:
            a: int = 0
            b: int  # type: ignore[misc]

    with pytest.raises(TypeError, match="__slots__"):
        @record
        class C:
            __slots__ = ("a",)
            a: int

    with pytest.raises(TypeError, match="__setattr__"):
        @record
        class D:
            a: int

            def __setattr__(self, name: str, value: object) -> None: ...

    with pytest.raises(TypeError, match="non-frozen"):
        @record(frozen=False)
        class E(Point):  # type: ignore[misc]
            pass

    with pytest.raises(ValueError, match="both"):
        field(default=1, default_factory=int)  # type: ignore[call-overload]


def test_methods_the_class_defines_are_kept() -> None:
    from qless_client._redis import RedisOptions

    assert "secret" not in repr(RedisOptions(password="secret"))
    assert RedisOptions(password="a") == RedisOptions(password="a")


# -- the point of it -----------------------------------------------------------------------------

CORES = [
    "beanstalk_client._commands", "beanstalk_client._events", "beanstalk_client._server_protocol",
    "beanstalk_client.server._state", "gearman_client._packets", "gearman_client._admin",
    "gearman_client._events", "gearman_client._server_protocol", "gearman_client.server._state",
    "workq_client._commands", "workq_client._events", "workq_client._records",
    "workq_client._server_protocol", "workq_client._session", "workq_client.server._state",
    "jobwire._url", "jobwire._listen", "qless_client._resp",
]


def test_importing_a_core_does_not_import_dataclasses() -> None:
    code = (f"import sys\nfor m in {CORES!r}:\n    __import__(m)\n"
            "    assert 'dataclasses' not in sys.modules, m\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_mypy_reads_records_as_frozen_dataclasses(tmp_path: Path) -> None:
    snippet = tmp_path / "snippet.py"
    snippet.write_text(
        "from jobwire._record import field, record, replace\n"
        "@record\n"
        "class P:\n"
        "    x: int\n"
        "    tags: list[str] = field(default_factory=list)\n"
        "@record(frozen=False)\n"
        "class M:\n"
        "    n: int = 0\n"
        "p = P(1)\n"
        "reveal_type(p.x)\n"
        "reveal_type(P.__match_args__)\n"
        "q: P = replace(p, x=2)\n"
        "m = M()\n"
        "m.n = 3\n"
        "P('a')\n"  # error: the field's type
        "P()\n"  # error: a missing field
        "p.x = 2\n"  # error: frozen
        "P(1, [], 3)\n"  # error: too many arguments
    )
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"),
         "--no-error-summary", str(snippet)],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )
    lines = proc.stdout.splitlines()
    errors = [line.split(": error: ")[0].rsplit(":", 1)[-1] for line in lines
              if ": error:" in line]
    assert errors == ["15", "16", "17", "18"], proc.stdout
    assert 'Revealed type is "int"' in proc.stdout, proc.stdout
    assert "tuple[Literal['x'], Literal['tags']]" in proc.stdout, proc.stdout
    assert 'Property "x" defined in "P" is read-only' in proc.stdout, proc.stdout


def test_a_records_init_is_compiled_when_first_used() -> None:
    """A process compiles the ``__init__`` of the records it builds only (a server defines
    dozens it may never build): until then the class holds a stand-in, which any look at
    ``__init__`` replaces, so signatures and instances are the same either way."""

    @record
    class Late:
        a: int
        b: str = "x"

    assert not inspect.isfunction(vars(Late)["__init__"])
    assert Late(1) == Late(1, "x")
    assert inspect.isfunction(vars(Late)["__init__"])

    @record
    class Looked:
        a: int

    assert list(inspect.signature(Looked).parameters) == ["a"]
    assert inspect.isfunction(vars(Looked)["__init__"])

"""``@record``: the frozen, slotted record classes of the Sans-IO cores, built fast at import.

Why not ``@dataclass``: the bundled servers are spawned by test suites that connect soon after,
so their start counts (issue 18), and ``dataclass(frozen=True, slots=True)`` costs about 0.5 ms
a class in CPython 3.11 (it compiles ``__init__``, ``__repr__``, ``__eq__``, ``__hash__``,
``__setattr__`` and ``__delattr__`` apart, one ``exec`` each, and imports ``inspect``). A record
compiles only its ``__init__``, once per shape (field names, which have defaults), shared by every
class of that shape; the other methods are shared functions that read the class's field tuples
(about 15-25 µs a class on top of its class statement).

What a record class gets, as ``dataclass(frozen=True, slots=True)`` gives it: fields from its
annotations (``ClassVar`` ones skipped; strings, as ``from __future__ import annotations`` makes
them, are read as text) after those of record base classes; defaults and :func:`field`;
``__post_init__`` called at the end of ``__init__``; ``__slots__`` (the class is rebuilt with
them); ``__repr__``; ``__eq__`` (same class only); ``__hash__`` when frozen; ``__match_args__``;
``__setattr__``/``__delattr__`` raising :class:`FrozenInstanceError` when frozen, and
``__getstate__``/``__setstate__`` so frozen records pickle and copy. A method the class defines
itself is kept. The generated ``__init__`` of a frozen record sets each slot through its member
descriptor's ``__set__`` (about a quarter cheaper than ``object.__setattr__``).

Records also speak the dataclasses protocol (``__dataclass_fields__``, ``__dataclass_params__``),
so ``dataclasses.fields``, ``replace``, ``asdict`` and ``is_dataclass`` work on them in code that
imports ``dataclasses`` anyway (tests, the CLI); the cores use :func:`fields` and :func:`replace`
from here.
"""

from __future__ import annotations

import sys
from _thread import get_ident
from operator import attrgetter
from types import CellType, CodeType, FunctionType

TYPE_CHECKING = False  # typing is not imported: the bundled servers start without it
if not TYPE_CHECKING:  # run-time stand-ins, before the real names (which ruff then reads)
    from ._typing import TypeVar, overload

    # importing typing_extensions costs about 10 ms
    def dataclass_transform(**_kwargs: object) -> Callable[[T], T]:
        return lambda function: function
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar, overload

    from typing_extensions import dataclass_transform

__all__ = ["MISSING", "Field", "FrozenInstanceError", "field", "fields", "record", "replace"]

T = TypeVar("T")


class FrozenInstanceError(AttributeError):
    """An assignment to (or deletion of) a field of a frozen record."""


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


class _Factory:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


#: The default of a field that has none.
MISSING: Any = _Missing()
_FACTORY: Any = _Factory()  # the parameter default of a field with a default_factory


class Field:
    """One field of a record: what :func:`field` returns and :func:`fields` lists."""

    __slots__ = ("compare", "default", "default_factory", "init", "name", "repr", "type")

    def __init__(
        self, default: Any = MISSING, default_factory: Any = MISSING, init: bool = True,
        repr: bool = True, compare: bool = True,
    ) -> None:
        self.name = ""
        self.type: Any = None
        self.default = default
        self.default_factory = default_factory
        self.init = init
        self.repr = repr
        self.compare = compare

    # What dataclasses.fields() and dataclasses.replace() read: they run only in a process that
    # imported dataclasses, so it is there to look at.
    @property
    def _field_type(self) -> Any:
        return sys.modules["dataclasses"]._FIELD

    def __repr__(self) -> str:
        return (f"Field(name={self.name!r}, type={self.type!r}, default={self.default!r}, "
                f"default_factory={self.default_factory!r}, init={self.init}, "
                f"repr={self.repr}, compare={self.compare})")


@overload
def field(
    *, default: T, init: bool = ..., repr: bool = ..., compare: bool = ...
) -> T: ...
@overload
def field(
    *, default_factory: Callable[[], T], init: bool = ..., repr: bool = ..., compare: bool = ...
) -> T: ...
@overload
def field(*, init: bool = ..., repr: bool = ..., compare: bool = ...) -> Any: ...
def field(
    *, default: Any = MISSING, default_factory: Any = MISSING, init: bool = True,
    repr: bool = True, compare: bool = True,
) -> Any:
    """A field with options, as ``dataclasses.field``: ``default`` or ``default_factory``
    (called for each new record), ``init`` (a parameter of ``__init__``), ``repr`` (shown by
    ``repr``), ``compare`` (used by ``==`` and ``hash``).

    Raises:
        ValueError: both ``default`` and ``default_factory`` are given.
    """
    if default is not MISSING and default_factory is not MISSING:
        raise ValueError("cannot specify both default and default_factory")
    return Field(default, default_factory, init, repr, compare)


class _Params:
    """``__dataclass_params__`` of a record (what dataclasses reads of a base class)."""

    __slots__ = ("eq", "frozen", "init")
    repr = True
    order = False
    unsafe_hash = False
    match_args = True
    kw_only = False
    slots = True

    def __init__(self, init: bool, eq: bool, frozen: bool) -> None:
        self.init = init
        self.eq = eq
        self.frozen = frozen


# -- the methods every record class shares -------------------------------------------------------

_in_repr: set[tuple[int, int]] = set()  # (id, thread) of the records being repr'd: cycles


def _repr(self: Any) -> str:
    key = (id(self), get_ident())
    if key in _in_repr:
        return "..."
    _in_repr.add(key)
    try:
        cls = self.__class__
        inner = ", ".join([f"{name}={getattr(self, name)!r}" for name in cls.__record_repr__])
        return f"{cls.__qualname__}({inner})"
    finally:
        _in_repr.discard(key)


def _eq(self: Any, other: Any) -> Any:
    cls = self.__class__
    if other.__class__ is cls:
        key = cls.__record_key__
        return key(self) == key(other)
    return NotImplemented


def _hash(self: Any) -> int:
    return hash(self.__class__.__record_key__(self))


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    cls = self.__class__
    if "__record_key__" in cls.__dict__ or name in cls.__dataclass_fields__:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")
    object.__setattr__(self, name, value)  # an attribute of a plain subclass


def _frozen_delattr(self: Any, name: str) -> None:
    cls = self.__class__
    if "__record_key__" in cls.__dict__ or name in cls.__dataclass_fields__:
        raise FrozenInstanceError(f"cannot delete field {name!r}")
    object.__delattr__(self, name)


def _getstate(self: Any) -> list[Any]:
    return [getattr(self, name) for name in self.__class__.__dataclass_fields__]


def _setstate(self: Any, state: list[Any]) -> None:
    for name, value in zip(self.__class__.__dataclass_fields__, state, strict=False):
        object.__setattr__(self, name, value)  # the frozen __setattr__ refuses


def _key_of(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The tuple of the fields ``==`` and ``hash`` compare (a tuple even for one or none, so
    hashes are those of the dataclass the record replaces)."""
    if len(names) > 1:
        key: Callable[[Any], tuple[Any, ...]] = attrgetter(*names)
        return key
    if names:
        get = attrgetter(names[0])
        return lambda obj: (get(obj),)
    return lambda obj: ()


# -- __init__: one code object per shape ---------------------------------------------------------

# (frozen, __post_init__, self's name, ((name, kind), ...)) -> the __init__ code; kind is "p"
# (plain parameter), "d" (parameter with a default), "f" (parameter with a default_factory), or
# "D"/"F" (not a parameter: set from its default/factory).
_INIT_CODE: dict[tuple[Any, ...], CodeType] = {}


def _init_code(key: tuple[Any, ...]) -> CodeType:
    frozen, post_init, self_name, shape = key
    params = [self_name]
    lines = []
    free = []
    for i, (name, kind) in enumerate(shape):
        if kind in "pdf":
            params.append(name)
        if kind == "f":
            value = f"__record_factory{i}() if {name} is __record_FACTORY else {name}"
            free += [f"__record_factory{i}", "__record_FACTORY"]
        elif kind == "D":
            value = f"__record_default{i}"
            free.append(value)
        elif kind == "F":
            value = f"__record_factory{i}()"
            free.append(f"__record_factory{i}")
        else:
            value = name
        if frozen:
            lines.append(f"__record_set{i}({self_name}, {value})")
            free.append(f"__record_set{i}")
        else:
            lines.append(f"{self_name}.{name} = {value}")
    if post_init:
        lines.append(f"{self_name}.__post_init__()")
    body = "\n".join(f"        {line}" for line in lines or ["pass"])
    source = (f"def __create__({', '.join(dict.fromkeys(free))}):\n"
              f"    def __init__({', '.join(params)}):\n{body}\n"
              f"    return __init__\n")
    namespace: dict[str, Any] = {}
    exec(compile(source, "<record __init__>", "exec"), {}, namespace)
    code = next(c for c in namespace["__create__"].__code__.co_consts
                if isinstance(c, CodeType))
    _INIT_CODE[key] = code
    return code


def _make_init(cls: type, fields: dict[str, Field], frozen: bool) -> Callable[..., None]:
    shape = []
    values: dict[str, Any] = {"__record_FACTORY": _FACTORY}
    defaults = []
    seen_default = ""
    for i, (name, f) in enumerate(fields.items()):
        if f.init:
            if f.default_factory is not MISSING:
                kind = "f"
                values[f"__record_factory{i}"] = f.default_factory
                defaults.append(_FACTORY)
            elif f.default is not MISSING:
                kind = "d"
                defaults.append(f.default)
            elif seen_default:
                raise TypeError(f"non-default argument {name!r} follows default argument "
                                f"{seen_default!r}")
            else:
                kind = "p"
            if kind != "p":
                seen_default = name
        elif f.default_factory is not MISSING:
            kind = "F"
            values[f"__record_factory{i}"] = f.default_factory
        elif f.default is not MISSING:
            kind = "D"
            values[f"__record_default{i}"] = f.default
        else:
            continue  # set by __post_init__, or never
        if frozen:
            values[f"__record_set{i}"] = _slot_setter(cls, name)
        shape.append((name, kind))
    key = (frozen, hasattr(cls, "__post_init__"), "__record_self" if "self" in fields else "self",
           tuple(shape))
    code = _INIT_CODE.get(key) or _init_code(key)
    module = sys.modules.get(cls.__module__)
    init = FunctionType(
        code, module.__dict__ if module is not None else {}, "__init__", tuple(defaults) or None,
        tuple(CellType(values[name]) for name in code.co_freevars),
    )
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    annotations: dict[str, Any] = {name: f.type for name, f in fields.items() if f.init}
    annotations["return"] = None
    init.__annotations__ = annotations
    return init


def _slot_setter(cls: type, name: str) -> Any:
    """The ``__set__`` of the slot ``name`` (declared by ``cls`` or a base class)."""
    for base in cls.__mro__:
        if name in base.__dict__:
            return base.__dict__[name].__set__
    raise TypeError(f"{cls.__name__} has no slot {name!r}")  # pragma: no cover


# -- the decorator -------------------------------------------------------------------------------


def _is_classvar(annotation: Any) -> bool:
    if isinstance(annotation, str):  # as dataclasses reads it: ClassVar[...] or typing.ClassVar
        head = annotation.split("[", 1)[0].strip()
        return head == "ClassVar" or head.endswith(".ClassVar")
    typing = sys.modules.get("typing")
    return typing is not None and (
        annotation is typing.ClassVar or getattr(annotation, "__origin__", None) is typing.ClassVar
    )


_PARAMS: dict[tuple[bool, bool, bool], _Params] = {}  # one per kind: what dataclasses reads


def _build(cls: type[T], init: bool, eq: bool, frozen: bool) -> type[T]:
    """The record class of ``cls``: a second class from its namespace, now with ``__slots__``
    (a class cannot gain them once made) and the shared methods. One pass over the fields; a
    class whose fields are all plain (no base record, no :func:`field`) takes the short way."""
    body = cls.__dict__
    if "__slots__" in body:
        raise TypeError(f"{cls.__name__} already specifies __slots__")
    fields: dict[str, Field] = {}
    mro = cls.__mro__
    inherited: set[str] = set()  # the slots of the base classes
    if len(mro) > 2:
        base_frozen = None
        for base in mro[-2:0:-1]:
            base_body = base.__dict__
            base_fields = base_body.get("__dataclass_fields__")
            if base_fields is not None:
                fields.update(base_fields)
                base_frozen = base_body["__dataclass_params__"].frozen
            slots = base_body.get("__slots__")
            if slots:
                inherited.update((slots,) if isinstance(slots, str) else slots)
        if base_frozen is not None and base_frozen != frozen:
            raise TypeError("cannot inherit non-frozen record from a frozen one" if base_frozen
                            else "cannot inherit frozen record from a non-frozen one")
    plain = not fields  # every field a parameter, shown and compared
    own = []
    for name, annotation in body.get("__annotations__", {}).items():
        if not isinstance(annotation, str) or "Var" in annotation:  # the rare ones, in full
            if _is_classvar(annotation):
                continue
            if isinstance(annotation, str) and annotation.split("[", 1)[0].strip().endswith(
                    "InitVar"):
                raise TypeError(f"{cls.__name__}.{name}: InitVar is not supported by record")
        default = body.get(name, MISSING)
        if isinstance(default, Field):
            f = default
            plain = False
        else:
            f = Field(default)
        if f.default is not MISSING and type(f.default).__hash__ is None:
            raise ValueError(f"mutable default {type(f.default)} for field {name} is not "
                             f"allowed: use default_factory")
        f.name = name
        f.type = annotation
        fields[name] = f
        own.append(name)

    namespace = dict(body)
    if plain:
        names = repr_names = key_names = tuple(fields)
    else:
        names = tuple(name for name, f in fields.items() if f.init)
        repr_names = tuple(name for name, f in fields.items() if f.repr)
        key_names = tuple(name for name, f in fields.items() if f.compare)
    namespace["__slots__"] = (tuple(name for name in fields if name not in inherited)
                              if inherited else tuple(fields))
    for name in own:
        namespace.pop(name, None)  # its default: the slot takes its place
    namespace.pop("__dict__", None)
    namespace.pop("__weakref__", None)
    namespace["__qualname__"] = cls.__qualname__
    namespace["__dataclass_fields__"] = fields
    kind = (init, eq, frozen)
    namespace["__dataclass_params__"] = _PARAMS.get(kind) or _PARAMS.setdefault(
        kind, _Params(init, eq, frozen))
    namespace["__record_repr__"] = repr_names
    namespace["__record_key__"] = staticmethod(_key_of(key_names))
    if "__repr__" not in body:
        namespace["__repr__"] = _repr
    if "__match_args__" not in body:
        namespace["__match_args__"] = names
    if eq:
        if "__eq__" not in body:
            namespace["__eq__"] = _eq
        if "__hash__" not in body or (body["__hash__"] is None and "__eq__" in body):
            namespace["__hash__"] = _hash if frozen else None
    if frozen:
        if "__setattr__" in body or "__delattr__" in body:
            name = "__setattr__" if "__setattr__" in body else "__delattr__"
            raise TypeError(f"cannot overwrite attribute {name} in frozen class "
                            f"{cls.__name__}")
        namespace["__setattr__"] = _frozen_setattr
        namespace["__delattr__"] = _frozen_delattr
        if "__getstate__" not in body:
            namespace["__getstate__"] = _getstate
        if "__setstate__" not in body:
            namespace["__setstate__"] = _setstate
    lazy = None
    if init and "__init__" not in body:
        # in the namespace, not set on the class after: a class's __init__ set later costs
        # CPython an update of its slots
        namespace["__init__"] = lazy = _LazyInit(fields, frozen)
    metaclass: type[type] = type(cls)
    new: type[T] = metaclass(cls.__name__, cls.__bases__, namespace)
    if lazy is not None:
        lazy.cls = new
    return new


class _LazyInit:
    """A record's ``__init__`` until first looked up: the first ``Record(...)``, or a look at
    ``Record.__init__`` (``inspect.signature`` does one), compiles the real one (about 0.1 ms
    a shape) and puts it in the class's place. A process then compiles only the records it
    builds: a bundled server defines 30-70 of them and answers its first command sooner."""

    __slots__ = ("cls", "fields", "frozen")

    def __init__(self, fields: dict[str, Field], frozen: bool) -> None:
        seen_default = ""  # the class's mistakes are refused now, as dataclasses does
        for name, f in fields.items():
            if not f.init:
                continue
            if f.default is not MISSING or f.default_factory is not MISSING:
                seen_default = name
            elif seen_default:
                raise TypeError(f"non-default argument {name!r} follows default argument "
                                f"{seen_default!r}")
        self.fields, self.frozen = fields, frozen
        self.cls: type = object  # the record class, once made (_build)

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        init = _make_init(self.cls, self.fields, self.frozen)
        type.__setattr__(self.cls, "__init__", init)
        return init if obj is None else init.__get__(obj, owner)


@overload
def record(cls: type[T], /) -> type[T]: ...
@overload
def record(
    *, init: bool = True, eq: bool = True, frozen: bool = True
) -> Callable[[type[T]], type[T]]: ...
@dataclass_transform(frozen_default=True, field_specifiers=(field, Field))
def record(
    cls: type[T] | None = None, /, *, init: bool = True, eq: bool = True, frozen: bool = True
) -> type[T] | Callable[[type[T]], type[T]]:
    """Make ``cls`` a record: a slotted class with an ``__init__``, ``__repr__``, ``__eq__``
    and (frozen) ``__hash__`` from its annotated fields, frozen unless ``frozen=False``
    (``init=False``: the class has its own ``__init__``; ``eq=False``: identity equality).

    Raises:
        TypeError: the class declares ``__slots__``, ``__setattr__`` or ``__delattr__``
            (frozen), a field without a default follows one with a default, or frozen and
            non-frozen records are mixed by inheritance.
        ValueError: a default is mutable (a list, dict or set: use ``default_factory``).
    """
    if cls is None:
        return lambda cls: _build(cls, init, eq, frozen)
    return _build(cls, init, eq, frozen)


# -- helpers -------------------------------------------------------------------------------------


def fields(class_or_instance: object) -> tuple[Field, ...]:
    """The fields of a record class or instance, in order.

    Raises:
        TypeError: not a record.
    """
    try:
        found: dict[str, Field] = class_or_instance.__dataclass_fields__  # type: ignore[attr-defined]
    except AttributeError:
        raise TypeError("fields() needs a record class or instance") from None
    return tuple(found.values())


def replace(obj: T, /, **changes: Any) -> T:
    """A new record like ``obj`` with ``changes`` (built by its ``__init__``, so its checks
    and ``__post_init__`` run again).

    Raises:
        TypeError: ``obj`` is not a record, or a change names no field.
        ValueError: a change names a field with ``init=False``.
    """
    try:
        found: dict[str, Field] = obj.__dataclass_fields__  # type: ignore[attr-defined]
    except AttributeError:
        raise TypeError("replace() needs a record instance") from None
    for name, f in found.items():
        if not f.init:
            if name in changes:
                raise ValueError(f"field {name} is declared with init=False, it cannot be "
                                 f"specified with replace()")
        elif name not in changes:
            changes[name] = getattr(obj, name)
    return obj.__class__(**changes)

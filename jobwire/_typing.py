"""Run-time stand-ins for the few ``typing`` names that the bundled servers' modules use at run
time: ``Generic``, ``TypeVar``, ``cast`` and ``overload``; and ``mypyc_attr`` (from
``mypy_extensions``, which only the compiled build needs: see docs/compiled.md).

Why: a spawned bundled server must answer its first command about as soon as a bare Python
process would (issue 18), and importing ``typing`` costs about 2 ms of that. The modules a
server imports before its first reply read the real names for mypy and these at run time::

    TYPE_CHECKING = False
    if TYPE_CHECKING:
        from typing import Generic, TypeVar
    else:
        from jobwire._typing import Generic, TypeVar

mypy reads only the first branch, so the types it checks are the real ones. At run time a
``Generic`` subclass can still be subscripted (``Command[Reply]`` is ``Command``), and nothing
here keeps what ``typing`` would (no ``__parameters__``, no overload registry).
"""

from __future__ import annotations

__all__ = ["Generic", "TypeVar", "cast", "mypyc_attr", "overload"]


class Generic:
    """``typing.Generic`` at run time: ``Generic[T]`` and ``Sub[X]`` are the class itself."""

    __slots__ = ()

    def __class_getitem__(cls, params: object) -> type:
        return cls


class TypeVar:
    """``typing.TypeVar`` at run time: a name, for ``Generic[T]`` (which ignores it)."""

    __slots__ = ("__name__",)

    def __init__(self, name: str, *constraints: object, **options: object) -> None:
        self.__name__ = name

    def __repr__(self) -> str:
        return f"~{self.__name__}"


def cast(typ: object, value: object) -> object:
    """``typing.cast`` at run time: ``value`` unchanged."""
    return value


def overload(function: object) -> object:
    """``typing.overload`` at run time: the stub unchanged (the implementation that follows
    replaces it)."""
    return function


TYPE_CHECKING = False
if TYPE_CHECKING:  # mypyc reads this one (docs/compiled.md); mypy_extensions comes with mypy
    from mypy_extensions import mypyc_attr
else:

    def mypyc_attr(*attrs: str, **options: object) -> object:
        """``mypy_extensions.mypyc_attr`` at run time: a class decorator that returns the
        class unchanged (mypyc applies the real one when it compiles the class)."""
        return lambda cls: cls

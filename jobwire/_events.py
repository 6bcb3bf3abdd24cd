"""The sentinel every Sans-IO core's ``next_event()`` returns when it needs more bytes."""

from __future__ import annotations

import enum

TYPE_CHECKING = False  # typing is not imported at run time: a server starts without it
if TYPE_CHECKING:
    from typing import Final

__all__ = ["NEED_DATA", "NeedData"]


class NeedData(enum.Enum):
    """The type of :data:`NEED_DATA`; an enum so ``event is NEED_DATA`` narrows for mypy."""

    #: No complete event is buffered: feed more bytes with ``receive_data``.
    NEED_DATA = "NEED_DATA"


NEED_DATA: Final = NeedData.NEED_DATA

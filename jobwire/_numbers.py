"""Numbers in text a peer sent, read strictly: anything else is a ``RemoteProtocolError``.

``int()`` and ``float()`` are too lenient for a wire format and fail the wrong way: ``int()``
takes ``" 1"``, ``"+1"``, ``"1_0"`` and non-ASCII digits (``"²"`` passes ``str.isdigit()`` and
then fails in ``int()``; an Arabic-Indic one parses), and raises ``ValueError`` for more than
4,300 digits (Python's int-from-text limit). Every client parser reads a server's numbers
through these functions instead: ASCII digits only, an optional ``-`` where the field is
signed, and a cap on the number of digits (20 by default: every unsigned 64-bit number).
"""

from __future__ import annotations

from .errors import RemoteProtocolError

__all__ = ["MAX_DIGITS", "parse_decimal", "parse_int", "parse_uint"]

#: Digits of the largest unsigned 64-bit number (18446744073709551615).
MAX_DIGITS = 20


def _digits(raw: bytes | str, max_digits: int) -> bool:
    # bytes.isdigit() is ASCII-only; str.isdigit() is not ("²"), hence isascii().
    return 0 < len(raw) <= max_digits and raw.isascii() and raw.isdigit()


def _show(raw: bytes | str) -> str:
    return repr(raw[:40]) + ("..." if len(raw) > 40 else "")


def parse_uint(raw: bytes | str, what: str, max_digits: int = MAX_DIGITS) -> int:
    """``raw`` (1 to ``max_digits`` ASCII digits) as an ``int``.

    Raises:
        RemoteProtocolError: anything else (a sign, a space, an underscore, a non-ASCII digit,
            more than ``max_digits`` digits, nothing at all); the message names ``what``.
    """
    if not _digits(raw, max_digits):
        raise RemoteProtocolError(f"expected an unsigned integer for {what}, got {_show(raw)}")
    return int(raw)


def parse_int(raw: bytes | str, what: str, max_digits: int = MAX_DIGITS) -> int:
    """As :func:`parse_uint`, with an optional leading ``-``.

    Raises:
        RemoteProtocolError: not ``-?`` and 1 to ``max_digits`` ASCII digits.
    """
    body = raw[1:] if raw[:1] in (b"-", "-") else raw
    if not _digits(body, max_digits):
        raise RemoteProtocolError(f"expected an integer for {what}, got {_show(raw)}")
    return int(raw)


def parse_decimal(raw: bytes | str, what: str, max_digits: int = MAX_DIGITS) -> float:
    """``raw`` as ``digits`` or ``digits.digits`` (at most ``max_digits`` on each side), a
    ``float``. No sign, exponent, ``inf`` or ``nan``.

    Raises:
        RemoteProtocolError: anything else.
    """
    text = raw.decode("latin-1") if isinstance(raw, bytes) else raw
    whole, dot, fraction = text.partition(".")
    if not _digits(whole, max_digits) or (dot and not _digits(fraction, max_digits)):
        raise RemoteProtocolError(f"expected a decimal number for {what}, got {_show(raw)}")
    return float(text)

"""More of ``tf.strings``: ``strip``, ``lower``, ``upper``, ``regex_full_match`` and web-safe
base64 (``encode_base64``, ``decode_base64``), element by element on string tensors, as TF's
kernels do them: ``strip`` removes leading and trailing ASCII whitespace; ``lower``/``upper``
change ASCII letters only (``encoding=""``) or, with ``encoding="utf-8"``, every letter;
``regex_full_match`` matches the whole string over UTF-8 characters (Python's ``re`` stands in
for RE2: patterns outside their common syntax may differ, and ``re`` backtracks where RE2 is
linear); ``encode_base64`` uses the URL-safe alphabet (``-``
and ``_``) without padding unless ``pad``, and ``decode_base64`` takes it with or without
padding and refuses anything else."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..registry import apply, defop
from .strings import _as_bytes, _map, _string_input, _string_shape

StringStrip = defop("StringStrip", shape=_string_shape, differentiable=False)
StringLower = defop("StringLower", shape=_string_shape, differentiable=False)
StringUpper = defop("StringUpper", shape=_string_shape, differentiable=False)
EncodeBase64 = defop("EncodeBase64", shape=_string_shape, differentiable=False)
DecodeBase64 = defop("DecodeBase64", shape=_string_shape, differentiable=False)
RegexFullMatch = defop("RegexFullMatch", differentiable=False)

_ASCII_SPACE = b" \t\n\v\f\r"


@StringStrip.kernel("cpu")
def _strip(ctx, x):
    return _map(x, lambda s: s.strip(_ASCII_SPACE))


def _case(ctx, x, upper: bool):
    if ctx.attrs["encoding"]:

        def fn(s):
            try:
                t = s.decode("utf-8")
            except UnicodeDecodeError:
                return b""  # TF's answer for a string that is not UTF-8
            return (t.upper() if upper else t.lower()).encode("utf-8")
    else:

        def fn(s):
            return s.upper() if upper else s.lower()  # bytes: ASCII letters only

    return _map(x, fn)


@StringLower.kernel("cpu")
def _lower(ctx, x):
    return _case(ctx, x, False)


@StringUpper.kernel("cpu")
def _upper(ctx, x):
    return _case(ctx, x, True)


@EncodeBase64.kernel("cpu")
def _encode_base64(ctx, x):
    pad = ctx.attrs["pad"]
    return _map(
        x,
        lambda s: base64.urlsafe_b64encode(s) if pad else base64.urlsafe_b64encode(s).rstrip(b"="),
    )


_B64 = re.compile(rb"^[A-Za-z0-9_-]*={0,2}$")


@DecodeBase64.kernel("cpu")
def _decode_base64(ctx, x):
    def fn(s):
        if not _B64.match(s) or len(s.rstrip(b"=")) % 4 == 1:
            raise InvalidArgumentError(
                f"DecodeBase64 {ctx.op.name!r}: invalid character or length found in {s[:40]!r}"
            )
        try:
            return base64.urlsafe_b64decode(s.rstrip(b"=") + b"=" * (-len(s.rstrip(b"=")) % 4))
        except binascii.Error as e:
            raise InvalidArgumentError(f"DecodeBase64 {ctx.op.name!r}: {e}") from None

    return _map(x, fn)


@RegexFullMatch.shape
def _full_match_shape(op):
    return [(_string_input(op).shape, _dt.bool_)]


@RegexFullMatch.kernel("cpu")
def _full_match(ctx, x):
    """Matched over UTF-8 characters, as RE2 matches (a string that is not UTF-8: its bytes)."""
    if ctx.state is None:
        pat = ctx.attrs["pattern"]
        ctx.state = (re.compile(pat.decode("utf-8")), re.compile(pat))
    text_rx, bytes_rx = ctx.state

    def match(s: bytes) -> bool:
        try:
            return text_rx.fullmatch(s.decode("utf-8")) is not None
        except UnicodeDecodeError:
            return bytes_rx.fullmatch(s) is not None

    return _map(x, match, bool)


def _check_encoding(fn: str, encoding: str) -> str:
    enc = (encoding or "").lower().replace("_", "-")
    if enc not in ("", "utf-8", "utf8"):
        raise ValueError(f"strings.{fn}: encoding must be '' or 'utf-8', got {encoding!r}")
    return "utf-8" if enc else ""


def strip(input: Any, name: Any = None) -> Any:  # noqa: A002
    """Each string without its leading and trailing ASCII whitespace."""
    return apply("StringStrip", [input], {}, name or "StringStrip")


def lower(input: Any, encoding: str = "", name: Any = None) -> Any:  # noqa: A002
    """Each string in lower case (ASCII letters; every letter with ``encoding="utf-8"``)."""
    return apply(
        "StringLower",
        [input],
        {"encoding": _check_encoding("lower", encoding)},
        name or "StringLower",
    )


def upper(input: Any, encoding: str = "", name: Any = None) -> Any:  # noqa: A002
    """Each string in upper case (ASCII letters; every letter with ``encoding="utf-8"``)."""
    return apply(
        "StringUpper",
        [input],
        {"encoding": _check_encoding("upper", encoding)},
        name or "StringUpper",
    )


def encode_base64(input: Any, pad: bool = False, name: Any = None) -> Any:  # noqa: A002
    """Web-safe base64 of each string (``=`` padding only with ``pad``)."""
    return apply("EncodeBase64", [input], {"pad": bool(pad)}, name or "EncodeBase64")


def decode_base64(input: Any, name: Any = None) -> Any:  # noqa: A002
    """The bytes of each web-safe base64 string (padded or not)."""
    return apply("DecodeBase64", [input], {}, name or "DecodeBase64")


def regex_full_match(input: Any, pattern: Any, name: Any = None) -> Any:  # noqa: A002
    """Whether each whole string matches ``pattern``."""
    pat = _as_bytes(pattern, "regex_full_match: pattern")
    try:
        re.compile(pat)
    except re.error as e:
        raise InvalidArgumentError(f"regex_full_match: invalid pattern {pat!r}: {e}") from None
    return apply("RegexFullMatch", [input], {"pattern": pat}, name or "RegexFullMatch")


__all__ = ["decode_base64", "encode_base64", "lower", "regex_full_match", "strip", "upper"]

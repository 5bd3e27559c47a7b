"""More of ``tf.strings``: ``strip``, ``lower``, ``upper``, ``regex_full_match`` and web-safe
base64 (``encode_base64``, ``decode_base64``), element by element on string tensors, as TF's
kernels do them: ``strip`` removes leading and trailing ASCII whitespace; ``lower``/``upper``
change ASCII letters only (``encoding=""``) or, with ``encoding="utf-8"``, every letter;
``regex_full_match`` matches the whole string over UTF-8 characters (Python's ``re`` stands in
for RE2: ``\\w``, ``\\d``, ``\\s`` and ``\\b`` over ASCII, ``\\z`` the end of text, what RE2 lacks
refused (backreferences, lookaround, ``\\Z``, atomic groups, possessive quantifiers); ``re``
backtracks where RE2 is linear, so a pathological pattern is slow, not wrong);
``encode_base64`` uses the URL-safe alphabet (``-`` and ``_``) without padding unless ``pad``,
and ``decode_base64`` takes it with or without padding (only in a last group of four, as TF)
and refuses anything else."""

from __future__ import annotations

import base64
import binascii
import re
import warnings
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
            # as TF's kernel reads it: up to the first NUL (a C string), each ill-formed
            # sequence one U+FFFD (ICU's and Python's maximal-subpart rule)
            t = s.split(b"\x00", 1)[0].decode("utf-8", "replace")
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


_B64 = re.compile(rb"[A-Za-z0-9_-]*")


@DecodeBase64.kernel("cpu")
def _decode_base64(ctx, x):
    def fn(s):
        body = s  # TF's rule: only a last group of four may end in "=" or "=="
        if len(s) % 4 == 0 and s.endswith(b"="):
            body = s[:-2] if s.endswith(b"==") else s[:-1]
        if not _B64.fullmatch(body) or len(body) % 4 == 1:
            raise InvalidArgumentError(
                f"DecodeBase64 {ctx.op.name!r}: invalid character or length found in {s[:40]!r}"
            )
        try:
            return base64.urlsafe_b64decode(body + b"=" * (-len(body) % 4))
        except binascii.Error as e:
            raise InvalidArgumentError(f"DecodeBase64 {ctx.op.name!r}: {e}") from None

    return _map(x, fn)


@RegexFullMatch.shape
def _full_match_shape(op):
    return [(_string_input(op).shape, _dt.bool_)]


@RegexFullMatch.kernel("cpu")
def _full_match(ctx, x, pattern=None):
    """Matched over UTF-8 characters, as RE2 matches: a string that is not UTF-8 has bytes no
    pattern matches, so it never matches whole."""
    if pattern is not None:  # a pattern computed in the step: checked and compiled now
        pat = _as_bytes(pattern.item() if hasattr(pattern, "item") else pattern, "pattern")
        if ctx.state is None or ctx.state[0] != pat:
            ctx.state = (pat, _compile_re2(pat, f"RegexFullMatch {ctx.op.name!r}"))
    elif ctx.state is None:
        pat = ctx.attrs["pattern"]
        ctx.state = (pat, _compile_re2(pat, "RegexFullMatch"))
    rx = ctx.state[1]

    def match(s: bytes) -> bool:
        try:
            return rx.fullmatch(s.decode("utf-8")) is not None
        except UnicodeDecodeError:
            return False

    return _map(x, match, bool)


_QUANTIFIERS = "*+?}"


#: RE2's POSIX classes (inside brackets), as the ranges they name (ASCII, as RE2's)
_POSIX = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "ascii": "\\x00-\\x7f",
    "blank": "\\t ",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ",
    "upper": "A-Z",
    "word": "0-9A-Za-z_",
    "xdigit": "0-9A-Fa-f",
}
#: RE2's \\s (no \\v, which Python's has), \\w and \\d: ASCII whatever the case-folding
_ASCII_CLASSES = {"s": "\\t\\n\\f\\r ", "w": "0-9A-Za-z_", "d": "0-9"}
_WORD_EDGE = "(?:(?<=[0-9A-Za-z_])(?![0-9A-Za-z_])|(?<![0-9A-Za-z_])(?=[0-9A-Za-z_]))"
_NOT_WORD_EDGE = "(?:(?<=[0-9A-Za-z_])(?=[0-9A-Za-z_])|(?<![0-9A-Za-z_])(?![0-9A-Za-z_]))"


def _compile_re2(pat: bytes, where: str) -> re.Pattern:
    """``pat`` compiled by Python's ``re`` in RE2's sense: ``\\w``, ``\\d``, ``\\b`` over ASCII,
    ``\\s`` RE2's [\\t\\n\\f\\r ], POSIX classes (``[[:alpha:]]``), ``\\Q...\\E``, ``\\x{...}``,
    three-digit octal escapes, ``\\z`` and ``$`` the end of text (unless ``(?m)``), ``{,n}`` a
    literal; what RE2 lacks (backreferences, lookaround, ``\\Z``, atomic groups, possessive
    quantifiers, conditionals) is refused, as TF refuses it, and so is what hetbed cannot
    translate (``\\p`` Unicode classes, ``(?U)``, ``\\C``). ``(?i)`` folds Unicode case, as RE2."""
    try:
        text = pat.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidArgumentError(f"{where}: the pattern {pat!r} is not UTF-8") from None
    multiline = re.search(r"\(\?[a-zA-Z]*m", text) is not None
    out, i, in_class, class_start = [], 0, False, -1
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            e = text[i + 1]
            if e == "Q":  # a literal run, to \\E or the end
                end = text.find("\\E", i + 2)
                end = len(text) if end < 0 else end
                out.append(re.escape(text[i + 2 : end]))
                i = end + 2
                continue
            if e == "x" and text[i + 2 : i + 3] == "{":
                close = text.find("}", i + 3)
                try:
                    out.append(re.escape(chr(int(text[i + 3 : close], 16))))
                except (ValueError, OverflowError):
                    raise InvalidArgumentError(
                        f"{where}: invalid pattern {pat!r}: bad \\x{{...}} escape"
                    ) from None
                i = close + 1
                continue
            octal = re.match(r"[0-7]{3}", text[i + 1 : i + 4])
            if octal:
                out.append(re.escape(chr(int(octal.group(), 8))))
                i += 4
                continue
            if e in "123456789":
                _re2_refuse(where, pat, f"backreference \\{e}")
            if e == "Z":
                _re2_refuse(where, pat, "\\Z (RE2 writes the end of text \\z)")
            if e in "pP":
                _unsupported(where, pat, f"\\{e} (Unicode classes)")
            if e == "C":
                _unsupported(where, pat, "\\C (any byte)")
            ascii_class = _ASCII_CLASSES.get(e.lower())
            if ascii_class is not None:  # \\s \\w \\d and their negations, over ASCII as RE2's
                if e.islower():
                    out.append(ascii_class if in_class else f"[{ascii_class}]")
                elif in_class:
                    _unsupported(where, pat, f"\\{e} inside a class")
                else:
                    out.append(f"[^{ascii_class}]")
            elif e in "bB" and not in_class:
                out.append(_WORD_EDGE if e == "b" else _NOT_WORD_EDGE)
            else:
                out.append("\\Z" if e == "z" and not in_class else c + e)
            i += 2
            continue
        if in_class:
            if c == "[" and text[i + 1 : i + 2] == ":":
                close = text.find(":]", i + 2)
                name = text[i + 2 : close] if close > 0 else ""
                if name.startswith("^"):
                    _unsupported(where, pat, f"the negated class [:{name}:]")
                if name in _POSIX:
                    out.append(_POSIX[name])
                    i = close + 2
                    continue
            in_class = c != "]" or i == class_start  # a ] first in the class is literal
        elif c == "[":
            in_class = True
            class_start = i + (2 if text[i + 1 : i + 2] == "^" else 1)
        elif c == "(" and text[i + 1 : i + 2] == "?":
            rest = text[i + 2 : i + 4]
            for head, what in (
                ("=", "lookahead"),
                ("!", "negative lookahead"),
                ("<=", "lookbehind"),
                ("<!", "negative lookbehind"),
                ("P=", "named backreference"),
                (">", "atomic group"),
                ("(", "conditional"),
            ):
                if rest.startswith(head):
                    _re2_refuse(where, pat, what)
            flags = re.match(r"[a-zA-Z-]*", text[i + 2 :]).group()
            if "U" in flags:
                _unsupported(where, pat, "(?U) (ungreedy mode)")
        elif c == "+" and i and text[i - 1] in _QUANTIFIERS and not _escaped(text, i - 1):
            _re2_refuse(where, pat, "possessive quantifier")
        elif c == "{" and text[i + 1 : i + 2] == ",":
            out.append("\\{")  # RE2 reads {,n} as text (Python as {0,n})
            i += 1
            continue
        elif c == "$" and not multiline:
            out.append("\\Z")  # the end of text only (Python's $ also before a final newline)
            i += 1
            continue
        out.append(c)
        i += 1
    try:
        with warnings.catch_warnings():  # ("possible nested set": RE2 has no nested sets)
            warnings.simplefilter("ignore", FutureWarning)
            return re.compile("".join(out))  # (Unicode case folding under (?i), as RE2's)
    except re.error as e:
        raise InvalidArgumentError(f"{where}: invalid pattern {pat!r}: {e}") from None


def _unsupported(where: str, pat: bytes, what: str) -> None:
    raise InvalidArgumentError(
        f"{where}: pattern {pat!r}: hetbed's regex_full_match cannot match {what} (RE2 can)"
    )


def _escaped(text: str, i: int) -> bool:
    """Whether ``text[i]`` is escaped by an odd run of backslashes before it."""
    n = 0
    while i - n - 1 >= 0 and text[i - n - 1] == "\\":
        n += 1
    return n % 2 == 1


def _re2_refuse(where: str, pat: bytes, what: str) -> None:
    raise InvalidArgumentError(f"{where}: invalid pattern {pat!r}: RE2 has no {what}")


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
    """Whether each whole string matches ``pattern`` (RE2's syntax: see the module docstring);
    ``pattern`` a string, or a scalar string tensor (checked when the step runs)."""
    from ..graph import Tensor

    if isinstance(pattern, Tensor) and pattern.op.type == "Const":
        pattern = pattern.op.attrs["value"]
        pattern = pattern.item() if hasattr(pattern, "item") else pattern
    if isinstance(pattern, Tensor):
        if pattern.dtype != _dt.string or pattern.shape.ndims not in (None, 0):
            raise InvalidArgumentError(
                f"regex_full_match: pattern must be a scalar string, got {pattern.name} "
                f"({pattern.dtype.name}, shape {pattern.shape})"
            )
        return apply("RegexFullMatch", [input, pattern], {}, name or "RegexFullMatch")
    pat = _as_bytes(pattern, "regex_full_match: pattern")
    _compile_re2(pat, "regex_full_match")
    return apply("RegexFullMatch", [input], {"pattern": pat}, name or "RegexFullMatch")


__all__ = ["decode_base64", "encode_base64", "lower", "regex_full_match", "strip", "upper"]

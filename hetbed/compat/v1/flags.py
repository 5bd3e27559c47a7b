"""TF1's ``tf.app.flags`` / ``tf.flags`` (absl-style command-line flags) and ``tf.app.run``.

``DEFINE_string(name, default, help)`` (and ``DEFINE_integer``, ``DEFINE_float``,
``DEFINE_boolean`` / ``DEFINE_bool``, ``DEFINE_list``, ``DEFINE_multi_*``, ``DEFINE_enum``) declares a flag;
``FLAGS.name`` reads it. As in TF1, the first read parses ``sys.argv`` if nothing has yet (absl
alone would raise). Flags are written ``--name=value`` or ``--name value``; a boolean also
``--name`` / ``--noname``; ``--help`` prints them and exits. ``run(main)`` parses ``sys.argv``
and calls ``main(argv)`` with the arguments that are not flags (unknown flags included, as TF1's
``tf.app.run`` tolerates them), then exits with its return value.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

_TRUE = {"true", "t", "1", "yes", "y"}
_FALSE = {"false", "f", "0", "no", "n"}


class Error(ValueError):
    """A bad flag definition or value (absl's ``flags.Error``)."""


class _Flag:
    __slots__ = ("name", "default", "help", "kind", "choices", "value")

    def __init__(self, name: str, default: Any, help: str, kind: str, choices: Any = None):
        self.name, self.help, self.kind, self.choices = name, help, kind, choices
        self.default = None if default is None else self.convert(default)
        self.value = self.default

    def convert(self, raw: Any) -> Any:
        if self.kind.startswith("multi_"):  # a list of the base kind's values
            one = _Flag(self.name, None, self.help, self.kind[len("multi_") :])
            items = raw if isinstance(raw, (list, tuple)) else [raw]
            return [one.convert(x) for x in items]
        if not isinstance(raw, str):
            if self.kind == "list" and isinstance(raw, (list, tuple)):
                return [str(x) for x in raw]
            if self.kind == "bool":
                return bool(raw)
            if self.kind in ("integer", "float") and isinstance(raw, (int, float)):
                return int(raw) if self.kind == "integer" else float(raw)
            raw = str(raw)
        try:
            if self.kind == "integer":  # absl's rule: 0x.. hex, 0o.. octal, else decimal
                low = raw.strip().lower().lstrip("+-")
                base = 16 if low.startswith("0x") else 8 if low.startswith("0o") else 10
                return int(raw, base)
            if self.kind == "float":
                return float(raw)
            if self.kind == "bool":
                low = raw.lower()
                if low in _TRUE | _FALSE:
                    return low in _TRUE
                raise ValueError(f"expected true or false, got {raw!r}")
            if self.kind == "list":
                return [x.strip() for x in raw.split(",") if x.strip()]
        except ValueError as e:
            raise Error(f"flag --{self.name}: bad {self.kind} value {raw!r} ({e})") from None
        if self.kind == "enum" and raw not in self.choices:
            raise Error(f"flag --{self.name}: {raw!r} is not one of {self.choices}")
        return raw


class FlagValues:
    """A set of flags: ``FLAGS.name`` reads one (parsing ``sys.argv`` first if needed),
    ``FLAGS(argv)`` parses ``argv`` and returns ``[argv[0]]`` plus the arguments left over."""

    def __init__(self) -> None:
        object.__setattr__(self, "_flags", {})
        object.__setattr__(self, "_parsed", False)

    def _define(self, flag: _Flag) -> None:
        if flag.name in self._flags:
            raise Error(f"flag --{flag.name} is defined twice")
        self._flags[flag.name] = flag

    def is_parsed(self) -> bool:
        return self._parsed

    def __call__(self, argv: Sequence[str]) -> list[str]:
        argv = list(argv)
        rest: list[str] = argv[:1]
        given: set = set()  # multi flags given on this command line (their values accumulate)
        i = 1
        while i < len(argv):
            arg = argv[i]
            i += 1
            if arg == "--":
                rest += argv[i:]
                break
            if not arg.startswith("-") or arg == "-":
                rest.append(arg)
                continue
            name, eq, value = arg.lstrip("-").partition("=")
            if name in ("help", "helpfull", "h"):
                print(self.help_text())
                sys.exit(0)
            flag = self._flags.get(name)
            if flag is None and name.startswith("no") and not eq:
                neg = self._flags.get(name[2:])
                if neg is not None and neg.kind == "bool":
                    neg.value = False
                    continue
            if flag is None:
                rest.append(arg)  # unknown: left for the program, as TF1's tf.app.run does
                continue
            if not eq:
                if flag.kind == "bool":
                    flag.value = True
                    continue
                if i >= len(argv):
                    raise Error(f"flag --{name} needs a value")
                value = argv[i]
                i += 1
            if flag.kind.startswith("multi_"):
                flag.value = (flag.value if name in given else []) + flag.convert(value)
                given.add(name)
            else:
                flag.value = flag.convert(value)
        object.__setattr__(self, "_parsed", True)
        return rest

    def help_text(self) -> str:
        lines = ["flags:"]
        for f in self._flags.values():
            lines.append(f"  --{f.name}: {f.help} (default: {f.default!r})")
        return "\n".join(lines)

    def __getattr__(self, name: str) -> Any:
        flags = self.__dict__["_flags"]
        if name == "__flags":  # absl's name -> Flag dict, which TF1 programs print or iterate
            return dict(flags)  # (as TF's, without parsing the command line first)
        if name not in flags:
            raise AttributeError(f"unknown flag --{name}")
        if not self.__dict__["_parsed"]:
            self(sys.argv)
        return flags[name].value

    def __setattr__(self, name: str, value: Any) -> None:
        flag = self._flags.get(name)
        if flag is None:
            raise AttributeError(f"unknown flag --{name}; define it with DEFINE_* first")
        flag.value = value

    def __contains__(self, name: str) -> bool:
        return name in self._flags

    def __iter__(self) -> Iterator[str]:
        """The flags' names (absl's FlagValues: ``{k: FLAGS[k].value for k in FLAGS}``)."""
        return iter(list(self._flags))

    def __len__(self) -> int:
        return len(self._flags)

    def __getitem__(self, name: str) -> _Flag:
        """The flag itself (``.value``, ``.default``, ``.help``), parsing ``sys.argv`` first as
        reading ``FLAGS.name`` does."""
        if name not in self._flags:
            raise KeyError(f"unknown flag --{name}")
        if not self._parsed:
            self(sys.argv)
        return self._flags[name]

    def flag_values_dict(self) -> dict[str, Any]:
        return {n: f.value for n, f in self._flags.items()}


FLAGS = FlagValues()


def _definer(kind: str) -> Callable:
    def define(
        name: str, default: Any, help: str = "", flag_values: FlagValues = FLAGS, **_: Any
    ) -> None:
        flag_values._define(_Flag(name, default, help, kind))

    define.__name__ = f"DEFINE_{kind}"
    define.__doc__ = f"Define the {kind} flag ``--name`` with its default and help text."
    return define


DEFINE_string = _definer("string")
DEFINE_integer = _definer("integer")
DEFINE_float = _definer("float")
DEFINE_boolean = _definer("bool")
DEFINE_bool = DEFINE_boolean
DEFINE_list = _definer("list")
DEFINE_multi_string = _definer("multi_string")
DEFINE_multi_integer = _definer("multi_integer")
DEFINE_multi_float = _definer("multi_float")


def DEFINE_enum(  # noqa: N802 - TF's name
    name: str,
    default: Any,
    enum_values: Sequence[str],
    help: str = "",
    flag_values: FlagValues = FLAGS,
    **_: Any,
) -> None:
    """Define the flag ``--name`` taking one of ``enum_values``."""
    flag_values._define(_Flag(name, default, help, "enum", list(enum_values)))


def run(main: Callable | None = None, argv: Sequence[str] | None = None) -> None:
    """TF1's ``tf.app.run``: parse the flags of ``argv`` (default ``sys.argv``), call
    ``main(remaining argv)`` (default: the ``main`` of ``__main__``) and exit with its result."""
    args = list(sys.argv if argv is None else argv)
    rest = FLAGS(args)
    if main is None:
        main = sys.modules["__main__"].main
    sys.exit(main(rest))


__all__ = [
    "DEFINE_bool",
    "DEFINE_boolean",
    "DEFINE_enum",
    "DEFINE_float",
    "DEFINE_integer",
    "DEFINE_list",
    "DEFINE_multi_float",
    "DEFINE_multi_integer",
    "DEFINE_multi_string",
    "DEFINE_string",
    "FLAGS",
    "Error",
    "FlagValues",
    "run",
]

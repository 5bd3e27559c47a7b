"""Device names: parse, merge and print ``/job:J/replica:R/task:T/device:TYPE:N``."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

_PARSED: dict[str, DeviceSpec] = {}  # device string -> its DeviceSpec (see from_string)
# a field and its value after a colon (TF's /job:ps, /cpu:0); a bare device type (/cpu) stands
# for any of its kind; "cpu0" or "task1" without the colon is refused, as TensorFlow does
_FIELD = re.compile(r"^(job|replica|task|device|cpu|gpu|tpu)(?::(.*))?$", re.IGNORECASE)


@dataclass(frozen=True)
class DeviceSpec:
    """A full or partial device name; unset fields are None."""

    job: str | None = None
    replica: int | None = None
    task: int | None = None
    device_type: str | None = None
    device_index: int | None = None

    @classmethod
    def from_string(cls, spec: str | DeviceSpec | None) -> DeviceSpec:
        """Parse a device string; raises ValueError naming the bad part."""
        if spec is None or spec == "":
            return cls()
        if isinstance(spec, DeviceSpec):
            return spec
        if not isinstance(spec, str):
            raise TypeError(f"device spec must be a string, got {type(spec).__name__}")
        if cls is DeviceSpec:  # specs are frozen: a parsed string is reused (placement parses
            hit = _PARSED.get(spec)  # the same few names for every op)
            if hit is None:
                hit = cls._parse(spec)
                if len(_PARSED) < 4096:
                    _PARSED[spec] = hit
            return hit
        return cls._parse(spec)

    @classmethod
    def _parse(cls, spec: str) -> DeviceSpec:
        fields: dict = {}
        parts = [p for p in spec.strip().split("/") if p]
        for part in parts:
            m = _FIELD.match(part)
            if not m:
                near = re.match(r"^(job|replica|task|device|cpu|gpu|tpu)(\w+)$", part, re.I)
                hint = f" (did you mean '{near[1]}:{near[2]}'?)" if near else ""
                raise ValueError(f"malformed device spec {spec!r}: cannot parse {part!r}{hint}")
            key, val = m.group(1).lower(), m.group(2) or ""
            try:
                if key == "job":
                    if not val or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", val):
                        raise ValueError
                    fields["job"] = val
                elif key in ("replica", "task"):
                    fields[key] = int(val)
                    if fields[key] < 0:
                        raise ValueError
                elif key == "device":
                    dtype, _, idx = val.partition(":")
                    if not dtype:
                        raise ValueError
                    fields["device_type"] = dtype.lower()
                    if idx not in ("", "*"):
                        fields["device_index"] = int(idx)
                else:  # legacy /cpu:0, /gpu:1
                    fields["device_type"] = key
                    if val not in ("", "*"):
                        fields["device_index"] = int(val)
            except ValueError:
                raise ValueError(
                    f"malformed device spec {spec!r}: bad value in {part!r} "
                    "(expected e.g. /job:worker/replica:0/task:1/device:cpu:0)"
                ) from None
        return cls(**fields)

    def merge_from(self, other: DeviceSpec) -> DeviceSpec:
        """Fields set in ``other`` override those here (inner scopes win)."""
        return replace(
            self,
            **{
                k: getattr(other, k)
                for k in ("job", "replica", "task", "device_type", "device_index")
                if getattr(other, k) is not None
            },
        )

    def to_string(self) -> str:
        out = []
        if self.job is not None:
            out.append(f"/job:{self.job}")
        if self.replica is not None:
            out.append(f"/replica:{self.replica}")
        if self.task is not None:
            out.append(f"/task:{self.task}")
        if self.device_type is not None:
            idx = "*" if self.device_index is None else self.device_index
            out.append(f"/device:{self.device_type}:{idx}")
        return "".join(out)

    def matches(self, full: DeviceSpec) -> bool:
        """True when every field set here equals the same field of ``full``."""
        for k in ("job", "replica", "task", "device_type", "device_index"):
            v = getattr(self, k)
            if v is not None and not v == getattr(full, k):
                return False
        return True

    def __str__(self) -> str:
        return self.to_string()


_MERGED: dict[tuple, str] = {}  # (current, spec) -> merge_device's result


def merge_device(current: str, spec: str | DeviceSpec) -> str:
    key = (current, spec)
    hit = _MERGED.get(key)
    if hit is None:
        hit = DeviceSpec.from_string(current).merge_from(DeviceSpec.from_string(spec)).to_string()
        if len(_MERGED) < 4096:
            _MERGED[key] = hit
    return hit

"""cupyx.scipy.special (fake): scipy.special on the stand-in's buffers."""

from __future__ import annotations

from typing import Any

import numpy as np
from cupy._core import _unwrap, _wrap, current_device_id


def _special(name: str):
    def f(*args: Any) -> Any:
        import scipy.special as sp

        a = _unwrap(args, f"cupyx.scipy.special.{name}")
        return _wrap(np.asarray(getattr(sp, name)(*a)), current_device_id())

    f.__name__ = name
    return f


erf = _special("erf")
erfc = _special("erfc")
gammaln = _special("gammaln")
digamma = _special("digamma")
polygamma = _special("polygamma")
zeta = _special("zeta")

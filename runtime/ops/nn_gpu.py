"""Fused CUDA kernels (through cupy) for ops whose array-at-a-time form launches many small
kernels on a GPU: the max-pooling gradient. Compiled by cupy on first use and cached by it;
``nn.py`` uses them only where the array module has ``ElementwiseKernel`` (real cupy), so the
array-at-a-time form stays the reference and the path of stand-ins and of the CPU."""

from __future__ import annotations

from typing import Any

_KERNELS: dict[int, Any] = {}  # id(cupy module) -> compiled kernel

# One thread per input element (NHWC, C-contiguous): for each window holding it, it takes that
# window's gradient when it is the window's first maximum in row-major order (TF's rule, and
# nn.py's); padding is never a candidate; a window whose maximum is NaN routes nothing.
_MAX_POOL_GRAD = r"""
const int c = i % C;
int t = i / C;
const int w = t % W; t /= W;
const int h = t % H;
const int n = t / H;
const int hp = h + PT, wp = w + PL;
int oh0 = hp - KH + 1; oh0 = oh0 > 0 ? (oh0 + SH - 1) / SH : 0;
int ow0 = wp - KW + 1; ow0 = ow0 > 0 ? (ow0 + SW - 1) / SW : 0;
int oh1 = hp / SH; if (oh1 > HO - 1) oh1 = HO - 1;
int ow1 = wp / SW; if (ow1 > WO - 1) ow1 = WO - 1;
T acc = 0;
for (int oh = oh0; oh <= oh1; ++oh) {
  for (int ow = ow0; ow <= ow1; ++ow) {
    const long long yi = (((long long)n * HO + oh) * WO + ow) * C + c;
    const T ym = y[yi];
    int fh = -1, fw = -1;
    for (int a = 0; a < KH && fh < 0; ++a) {
      const int ih = oh * SH - PT + a;
      if (ih < 0 || ih >= H) continue;
      for (int b = 0; b < KW; ++b) {
        const int iw = ow * SW - PL + b;
        if (iw < 0 || iw >= W) continue;
        if (x[(((long long)n * H + ih) * W + iw) * C + c] == ym) { fh = ih; fw = iw; break; }
      }
    }
    if (fh == h && fw == w) acc += g[yi];
  }
}
dx = acc;
"""


def supports(xp: Any) -> bool:
    """Whether ``xp`` is an array module these kernels run on (real cupy)."""
    return hasattr(xp, "ElementwiseKernel") and hasattr(xp, "cuda")


def max_pool_grad(xp: Any, x: Any, y: Any, g: Any, dims: tuple) -> Any:
    """MaxPoolGrad of NHWC ``x`` (pooled ``y``, incoming gradient ``g``) in one kernel; ``dims``
    is nn._pool_dims's tuple."""
    n, h, w, c, kh, kw, sh, sw, ho, wo, (pt, _pb), (pl, _pr) = dims
    k = _KERNELS.get(id(xp))
    if k is None:
        k = _KERNELS[id(xp)] = xp.ElementwiseKernel(
            "raw T x, raw T y, raw T g, int32 H, int32 W, int32 C, int32 HO, int32 WO, "
            "int32 KH, int32 KW, int32 SH, int32 SW, int32 PT, int32 PL",
            "T dx",
            _MAX_POOL_GRAD,
            "hetbed_max_pool_grad",
        )
    x, y, g = (xp.ascontiguousarray(a) for a in (x, y, g.astype(x.dtype, copy=False)))
    dx = xp.empty(x.shape, dtype=x.dtype)
    k(x, y, g, h, w, c, ho, wo, kh, kw, sh, sw, pt, pl, dx)
    return dx

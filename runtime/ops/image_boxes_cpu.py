"""Compiled CPU kernels for image_boxes.py: bilinear CropAndResize and its image gradient (one
pass over the crops, each sample's four pixels read or added to in place: the gradient's
scatter was numpy's ``add.at``, several times slower), and NonMaxSuppression's greedy loop.
Positions and interpolation weights are computed in float32 as TF's kernels do, so the values
are those of the numpy path in image_boxes.py."""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, inline="always")
def _pos(lo, hi, i, n_in, n_out):  # pragma: no cover - compiled
    """TF's sampling position along one axis (float32), and whether it lies in the image."""
    if n_out > 1:
        scale = (hi - lo) * np.float32(n_in - 1) / np.float32(n_out - 1)
        p = lo * np.float32(n_in - 1) + np.float32(i) * scale
    else:
        p = np.float32(0.5 * (np.float64(lo) + np.float64(hi)) * (n_in - 1))
    return p, (p >= 0) and (p <= n_in - 1)


@njit(cache=True, nogil=True)
def crop_bilinear(img, boxes, box_ind, ch, cw, extrap, out):  # pragma: no cover - compiled
    """``out`` [N, ch, cw, C] float32 of ``img`` [B, H, W, C] float32."""
    _, h, w, c = img.shape
    for n in range(boxes.shape[0]):
        y1, x1, y2, x2 = boxes[n, 0], boxes[n, 1], boxes[n, 2], boxes[n, 3]
        b = box_ind[n]
        for i in range(ch):
            py, yin = _pos(y1, y2, i, h, ch)
            if not yin:
                for j in range(cw):
                    for k in range(c):
                        out[n, i, j, k] = extrap
                continue
            ty = int(math.floor(py))
            by = min(int(math.ceil(py)), h - 1)
            ty = max(min(ty, h - 1), 0)
            yl = py - np.float32(math.floor(py))
            for j in range(cw):
                px, xin = _pos(x1, x2, j, w, cw)
                if not xin:
                    for k in range(c):
                        out[n, i, j, k] = extrap
                    continue
                lx = max(min(int(math.floor(px)), w - 1), 0)
                rx = min(int(math.ceil(px)), w - 1)
                xl = px - np.float32(math.floor(px))
                tl, tr = img[b, ty, lx], img[b, ty, rx]
                bl, br = img[b, by, lx], img[b, by, rx]
                dst = out[n, i, j]
                for k in range(c):
                    top = tl[k] + (tr[k] - tl[k]) * xl
                    bottom = bl[k] + (br[k] - bl[k]) * xl
                    dst[k] = top + (bottom - top) * yl


@njit(cache=True, nogil=True)
def crop_bilinear_grad(grads, boxes, box_ind, h, w, out):  # pragma: no cover - compiled
    """Add each sample's gradient to the four pixels it read (``out`` [B, H, W, C] zeroed)."""
    n_boxes, ch, cw, c = grads.shape
    for n in range(n_boxes):
        y1, x1, y2, x2 = boxes[n, 0], boxes[n, 1], boxes[n, 2], boxes[n, 3]
        b = box_ind[n]
        for i in range(ch):
            py, yin = _pos(y1, y2, i, h, ch)
            if not yin:
                continue
            ty = max(min(int(math.floor(py)), h - 1), 0)
            by = min(int(math.ceil(py)), h - 1)
            yl = py - np.float32(math.floor(py))
            for j in range(cw):
                px, xin = _pos(x1, x2, j, w, cw)
                if not xin:
                    continue
                lx = max(min(int(math.floor(px)), w - 1), 0)
                rx = min(int(math.ceil(px)), w - 1)
                xl = px - np.float32(math.floor(px))
                g = grads[n, i, j]
                for k in range(c):
                    dtop = (np.float32(1) - yl) * g[k]
                    dbottom = yl * g[k]
                    out[b, ty, lx, k] += dtop * (np.float32(1) - xl)
                    out[b, ty, rx, k] += dtop * xl
                    out[b, by, lx, k] += dbottom * (np.float32(1) - xl)
                    out[b, by, rx, k] += dbottom * xl


@njit(cache=True, nogil=True)
def nms(boxes, order, k, iou_t):  # pragma: no cover - compiled
    """Greedy suppression over the candidates in ``order``: a box is kept unless its IoU with
    one kept already is ``iou_t`` or more (TF's rule, float32 arithmetic)."""
    n = boxes.shape[0]
    y1 = np.empty(n, np.float32)
    y2 = np.empty(n, np.float32)
    x1 = np.empty(n, np.float32)
    x2 = np.empty(n, np.float32)
    area = np.empty(n, np.float32)
    for i in range(n):
        y1[i] = min(boxes[i, 0], boxes[i, 2])
        y2[i] = max(boxes[i, 0], boxes[i, 2])
        x1[i] = min(boxes[i, 1], boxes[i, 3])
        x2[i] = max(boxes[i, 1], boxes[i, 3])
        area[i] = (y2[i] - y1[i]) * (x2[i] - x1[i])
    kept = np.empty(min(k, order.shape[0]), np.int64)
    m = 0
    for idx in order:
        if m >= k:
            break
        ok = True
        for s in range(m):
            j = kept[s]
            iou = np.float32(0)  # a box of no area overlaps nothing
            if area[idx] > 0 and area[j] > 0:
                ih = max(min(y2[idx], y2[j]) - max(y1[idx], y1[j]), np.float32(0))
                iw = max(min(x2[idx], x2[j]) - max(x1[idx], x1[j]), np.float32(0))
                inter = ih * iw
                iou = inter / (area[idx] + area[j] - inter)
            if iou >= iou_t:
                ok = False
                break
        if ok:
            kept[m] = idx
            m += 1
    return kept[:m]

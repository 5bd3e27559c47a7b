"""Reports: headings, paragraphs, tables (DataFrames) and figures (matplotlib), written as
Markdown with PNG files beside it and as one self-contained HTML file (images inlined)."""

from __future__ import annotations

import base64
import html
import io
import math
import os
from dataclasses import dataclass, field
from typing import Any

from hetbed.devices.fileio import atomic_write as _atomic_write


@dataclass
class _Block:
    kind: str
    payload: Any
    extra: Any = None


@dataclass
class Report:
    """Build with ``heading``/``text``/``table``/``figure``, then ``write(out_dir)``."""

    title: str
    blocks: list[_Block] = field(default_factory=list)
    data: dict[str, list] = field(default_factory=dict)

    def figure_data(self, name: str) -> list[dict]:
        """Panels of figure ``name`` as ``figures.describe`` gives them."""
        if name not in self.data:
            raise KeyError(f"no figure {name!r}; this report has {', '.join(self.data)}")
        return self.data[name]

    def heading(self, text: str, level: int = 2) -> None:
        self.blocks.append(_Block("heading", text, level))

    def text(self, text: str) -> None:
        """A paragraph (plain text; ``code`` in backticks is kept as is in Markdown)."""
        self.blocks.append(_Block("text", text))

    def code(self, text: str) -> None:
        """A preformatted block (kept verbatim)."""
        self.blocks.append(_Block("code", text))

    def table(self, df: Any, floatfmt: str | None = None, caption: str = "") -> None:
        """A table; its float columns as ``number`` writes them (one notation a column), or
        each value ``format(v, floatfmt)``."""
        self.blocks.append(_Block("table", df, (floatfmt, caption)))

    def figure(self, fig: Any, name: str, caption: str = "") -> None:
        """A matplotlib figure, saved as ``name``.png (and closed); raises ValueError (naming
        the figure) when a panel lacks axis labels with units or a legend it needs. What the
        figure shows stays readable as ``figure_data(name)``."""
        from . import figures

        try:
            figures.check(fig)
        except ValueError as e:
            raise ValueError(f"report {self.title!r}, figure {name!r}: {e}") from None
        self.data[name] = figures.describe(fig)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
        import matplotlib.pyplot as plt

        plt.close(fig)
        self.blocks.append(_Block("figure", buf.getvalue(), (name, caption)))

    def attachment(self, filename: str, data: bytes, text: str) -> None:
        """A file written beside the report (a trace, say), introduced by ``text``."""
        self.blocks.append(_Block("file", data, (filename, text)))

    # ---- output ---------------------------------------------------------------------------
    def write(self, out_dir: str) -> dict[str, str]:
        """Write report.md, report.html and the figures into ``out_dir``; return their paths.
        Figures and files an earlier report wrote there and this one does not are removed (a
        folder rerun with another study holds this study's figures alone); nothing else is."""
        os.makedirs(out_dir, exist_ok=True)
        paths = {}
        for b in self.blocks:
            if b.kind == "figure":
                p = os.path.join(out_dir, f"{b.extra[0]}.png")
                _atomic_write(p, b.payload)
                paths[b.extra[0]] = p
            elif b.kind == "file":
                p = os.path.join(out_dir, b.extra[0])
                _atomic_write(p, b.payload)
                paths[b.extra[0]] = p
        md = os.path.join(out_dir, "report.md")
        _atomic_write(md, self.markdown().encode())
        page = os.path.join(out_dir, "report.html")
        _atomic_write(page, self.html().encode())
        paths.update({"markdown": md, "html": page})
        _forget_earlier_files(out_dir, paths.values())
        return paths

    def markdown(self) -> str:
        out = [f"# {self.title}", ""]
        for b in self.blocks:
            if b.kind == "heading":
                out += ["#" * b.extra + " " + b.payload, ""]
            elif b.kind == "text":
                out += [b.payload, ""]
            elif b.kind == "code":
                out += ["```", b.payload, "```", ""]
            elif b.kind == "file":
                out += [f"{b.extra[1]} [`{b.extra[0]}`]({b.extra[0]})", ""]
            elif b.kind == "table":
                fmt, caption = b.extra
                out += [_md_table(b.payload, fmt), ""]
                if caption:
                    out += [f"*{caption}*", ""]
            elif b.kind == "figure":
                name, caption = b.extra
                out += [f"![{name}]({name}.png)", ""]
                if caption:
                    out += [f"*{caption}*", ""]
        return "\n".join(out)

    def html(self) -> str:
        parts = [
            "<!doctype html><html><head><meta charset='utf-8'>",
            f"<title>{html.escape(self.title)}</title>",
            "<style>body{font-family:system-ui,sans-serif;max-width:60em;margin:2em auto;"
            "padding:0 1em;color:#222}table{border-collapse:collapse;margin:1em 0}"
            "td,th{border:1px solid #ccc;padding:.3em .6em;text-align:right}"
            "th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}"
            "img{max-width:100%}figcaption,.cap{color:#555;font-style:italic}"
            "code{background:#f3f3f3;padding:0 .2em}.wide{overflow-x:auto}"
            "pre{overflow-x:auto;background:#f7f7f7;padding:.5em}</style></head><body>",
            f"<h1>{html.escape(self.title)}</h1>",
        ]
        for b in self.blocks:
            if b.kind == "heading":
                parts.append(f"<h{b.extra}>{html.escape(b.payload)}</h{b.extra}>")
            elif b.kind == "text":
                parts.append(f"<p>{_inline_code(html.escape(b.payload))}</p>")
            elif b.kind == "code":
                parts.append(f"<pre>{html.escape(b.payload)}</pre>")
            elif b.kind == "file":
                name = html.escape(b.extra[0])
                parts.append(
                    f"<p>{_inline_code(html.escape(b.extra[1]))} <a href='{name}'>{name}</a></p>"
                )
            elif b.kind == "table":
                fmt, caption = b.extra
                parts.append(f"<div class='wide'>{_html_table(b.payload, fmt)}</div>")
                if caption:
                    parts.append(f"<p class='cap'>{html.escape(caption)}</p>")
            elif b.kind == "figure":
                name, caption = b.extra
                data = base64.b64encode(b.payload).decode()
                parts.append(
                    f"<figure><img alt='{html.escape(caption or name)}' "
                    f"src='data:image/png;base64,{data}'>"
                    + (f"<figcaption>{html.escape(caption)}</figcaption>" if caption else "")
                    + "</figure>"
                )
        parts.append("</body></html>")
        return "\n".join(parts)


#: significant digits a report writes a measured or simulated number with
DIGITS = 4


def number(v: float, scientific: bool | None = None, whole: bool = False) -> str:
    """``v`` as a report writes it: ``DIGITS`` significant digits in fixed notation with
    thousands separators (2,300; 1,986; 1.095; 0.09690), or in scientific notation where
    ``scientific`` says so (None: where fixed notation would need 10 digits or more before
    the point or more than 4 zeros after it); ``whole``: no decimals (a column of whole
    numbers); inf as such, nan (no value: a metric the row's setting does not have, such as
    the PS NIC of an all-reduce) as an em dash."""
    if math.isnan(v):
        return "\u2014"
    if not math.isfinite(v):
        return str(v)
    a = abs(v)
    if scientific is None:
        scientific = a != 0.0 and not 1e-4 <= a < 1e9
    if scientific:
        return f"{v:.{DIGITS - 1}e}"
    places = 0 if whole or a == 0.0 else max(0, DIGITS - 1 - math.floor(math.log10(a)))
    return f"{v:,.{places}f}"


def _column_formatters(df: Any, fmt: str | None) -> list[Any]:
    """One function per column writing its values: floats by ``format(v, fmt)`` when a format
    is given, else by ``number`` with one notation for the whole column (scientific where any
    finite non-zero value needs it; without decimals where every value is whole); anything
    else as ``str``."""
    out = []
    for c in df.columns:
        if fmt is not None:
            out.append(lambda v, f=fmt: format(v, f) if isinstance(v, float) else str(v))
            continue
        vals = [v for v in df[c] if isinstance(v, float) and math.isfinite(v)]
        sci = any(v != 0.0 and not 1e-4 <= abs(v) < 1e9 for v in vals)
        whole = bool(vals) and all(v == int(v) for v in vals)
        out.append(lambda v, s=sci, w=whole: number(v, s, w) if isinstance(v, float) else str(v))
    return out


def _md_table(df: Any, fmt: str | None) -> str:
    cols = [str(c) for c in df.columns]
    fs = _column_formatters(df, fmt)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join(" --- " for _ in cols) + "|"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(f(v) for f, v in zip(fs, row)) + " |")
    return "\n".join(lines)


def _html_table(df: Any, fmt: str | None) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    fs = _column_formatters(df, fmt)
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(f(v))}</td>" for f, v in zip(fs, row)) + "</tr>"
        for row in df.itertuples(index=False)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def _inline_code(s: str) -> str:
    parts = s.split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


#: the names a report wrote into its folder, so that the next report there can remove its
#: leftovers (and never a file it did not write)
WRITTEN = ".report-files.json"


def _digest(path: str) -> str | None:
    import hashlib

    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def _forget_earlier_files(out_dir: str, written: Any) -> None:
    """Remove what the previous report in ``out_dir`` wrote and this one did not: a file its
    listing (``WRITTEN``: name -> SHA-256) names, still holding those very bytes. A file changed
    or replaced since, a name outside the folder, a link, and whatever the listing merely names
    (a listing copied, edited or crafted) are left alone."""
    import json

    mine = {os.path.basename(p): _digest(p) for p in written}
    listing = os.path.join(out_dir, WRITTEN)
    try:
        with open(listing, encoding="utf-8") as f:
            before = json.load(f)
    except (OSError, ValueError):
        before = {}
    if isinstance(before, list):  # (a listing of names alone, from an older hetbed: figures)
        before = {n: "png" for n in before if isinstance(n, str) and n.endswith(".png")}
    for name, digest in before.items() if isinstance(before, dict) else []:
        if not isinstance(name, str) or name in mine or os.path.basename(name) != name:
            continue
        path = os.path.join(out_dir, name)
        if not os.path.isfile(path) or os.path.islink(path):
            continue
        if digest == _digest(path) or (digest == "png" and _is_png(path)):
            os.remove(path)
    _atomic_write(listing, json.dumps(mine, sort_keys=True, indent=0).encode())


def _is_png(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(8) == b"\x89PNG\r\n\x1a\n"
    except OSError:
        return False

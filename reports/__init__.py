"""hetbed.reports: result frames (pandas) to figures (matplotlib) to Markdown/HTML."""

from hetbed.reports.report import Report

__all__ = ["Report"]

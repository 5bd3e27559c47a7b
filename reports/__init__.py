"""hetbed.reports (see DESIGN.md)."""

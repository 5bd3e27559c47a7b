"""hetbed.scenarios (see DESIGN.md)."""

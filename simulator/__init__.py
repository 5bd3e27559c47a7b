"""hetbed.simulator (see DESIGN.md)."""

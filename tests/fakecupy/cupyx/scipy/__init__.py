"""cupyx.scipy (fake): special."""

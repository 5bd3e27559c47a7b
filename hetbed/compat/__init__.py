"""Compatibility layouts: ``import hetbed.compat.v1 as tf`` runs TF1-style programs."""

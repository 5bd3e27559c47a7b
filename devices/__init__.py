"""Devices: the interface the executor runs nodes through, and the real CPU/GPU devices."""

from .base import Device
from .cpu import CPUDevice

__all__ = ["Device", "CPUDevice"]

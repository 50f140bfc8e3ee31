"""The network tests' Mosquitto (deploy/mosquitto's config, with accounts) for the load tests."""

from __future__ import annotations

from tests.net.conftest import mosquitto

__all__ = ["mosquitto"]

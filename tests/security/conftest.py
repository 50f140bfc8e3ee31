"""Attacks of a hostile client, in bounded form, against both brokers while the server runs.

The brokers and the in-process server come from the network tests' fixtures
(:mod:`tests.net.conftest`): ``mosquitto`` (deploy/'s config on a free port), ``embedded_broker``
and ``broker`` (each in turn). Traffic goes to loopback only; every attack has a bounded count
and run time.
"""

from __future__ import annotations

from tests.net.conftest import broker, embedded_broker, mosquitto

__all__ = ["broker", "embedded_broker", "mosquitto"]

"""Build ``deploy/mosquitto/ramino_limits.c``: Mosquitto's per-user publish rate plugin.

Mosquitto 2.0 has no publish rate per client; the plugin gives each username the token bucket
the embedded broker has (:class:`server.net.publish_guard.PublishLimits`: a PUBLISH costs one
token and one per KiB, ``rate`` a second up to ``burst``, a token back for each message to the
user's inbox; the server's account exempt). docs/operations.md, "Hardening", says how to size
it; deploy/mosquitto/README.md how to install it.

Building needs a C compiler and Mosquitto's plugin headers (Debian: ``mosquitto-dev`` and
``libmosquitto-dev``); :func:`build_plugin` raises :class:`PluginUnavailable` naming what is
missing.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

__all__ = ["PLUGIN_NAME", "SOURCE", "PluginUnavailable", "build_plugin"]

SOURCE = Path(__file__).resolve().parents[2] / "deploy" / "mosquitto" / "ramino_limits.c"
PLUGIN_NAME = "ramino_limits.so"
HINT = "Debian: apt-get install gcc mosquitto-dev libmosquitto-dev"


class PluginUnavailable(RuntimeError):
    """The plugin could not be built here; the message says why and what to install."""


def build_plugin(folder: Path) -> Path:
    """Compile the plugin into ``folder``; the path of the shared library.

    Raises:
        PluginUnavailable: no source, no C compiler, or the compiler failed (usually: the
            Mosquitto headers are not installed).
    """
    if not SOURCE.is_file():
        raise PluginUnavailable(f"{SOURCE} is missing")
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise PluginUnavailable(f"no C compiler (cc) to build {SOURCE.name}; {HINT}")
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / PLUGIN_NAME
    result = subprocess.run(
        [compiler, "-O2", "-fPIC", "-shared", "-o", str(target), str(SOURCE)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        first = next((line for line in result.stderr.splitlines() if "error" in line), "")
        raise PluginUnavailable(f"{SOURCE.name} did not compile ({first.strip()}); {HINT}")
    return target

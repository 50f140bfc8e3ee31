"""The wire contract and the Python client SDK: message types, the msgpack codec with decode
limits, topic names, card notation and error codes. Imports nothing from ``server`` or
``bots``; it arrives with the networked server."""

"""The Ramino server: the rules engine (``server.engine``), tables, the network shell and the
``ramino`` command (``server.cli``)."""

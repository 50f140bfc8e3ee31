"""Load tests of a Ramino deployment on Locust.

``loadtest/locustfile.py`` holds the scenarios (Locust user classes), ``loadtest.player`` the
protocol v1 client they play with (on Locust's MQTT client, under gevent), and ``loadtest.run``
the ``ramino loadtest`` command that runs a named scenario and checks its thresholds.
"""

"""The embedded broker's subscription table finds the filters that match a topic as MQTT 3.1.1
§4.7 says, including after filters come and go (its wildcard list is kept between messages)."""

from __future__ import annotations

import logging
from typing import Any

from server.net.embedded import _RaminoBroker, _Snapshots


def _matches(topic: str, a_filter: str) -> bool:
    # amqtt's own rule, unbound: it uses nothing of the broker but its logger.
    broker: Any = _RaminoBroker.__new__(_RaminoBroker)
    broker.logger = logging.getLogger("test")
    return bool(_RaminoBroker._matches(broker, topic, a_filter))


def _found(table: _Snapshots, topic: str) -> set[str]:
    return {session for matched in table.matching(topic, _matches) for session, _ in matched}


def test_the_exact_filter_and_the_wildcards_that_match_and_no_other() -> None:
    table = _Snapshots()
    table["a/b/c"] = [("exact", 0)]
    table["a/+/c"] = [("plus", 0)]
    table["a/#"] = [("hash", 0)]
    table["a/b"] = [("shorter", 0)]
    table["+/x/c"] = [("other", 0)]
    table["#"] = [("all", 0)]
    # §4.7.1: "+" is one level, "#" the parent and any number of levels below.
    assert {"exact", "plus", "hash", "all"} == _found(table, "a/b/c")
    assert {"shorter", "hash", "all"} == _found(table, "a/b")
    assert {"hash", "all"} == _found(table, "a")
    # §4.7.2: a topic starting with "$" is not matched by a filter starting with a wildcard.
    table["$SYS/x"] = [("sys", 0)]
    assert {"sys"} == _found(table, "$SYS/x")


def test_filters_added_or_removed_between_messages_count_at_once() -> None:
    table = _Snapshots()
    table["t/1"] = [("one", 0)]
    assert {"one"} == _found(table, "t/1")  # the wildcard list is built here: none
    table["t/+"] = [("late", 1)]
    assert {"one", "late"} == _found(table, "t/1")
    del table["t/+"]
    assert {"one"} == _found(table, "t/1")
    table.setdefault("t/#", [("set", 0)])
    assert {"one", "set"} == _found(table, "t/1")
    table.pop("t/#")
    table.update({"+/1": [("updated", 0)]})
    assert {"one", "updated"} == _found(table, "t/1")
    table.clear()
    assert set() == _found(table, "t/1")


def test_what_it_returns_is_a_copy() -> None:
    """A broadcast awaits between deliveries: a subscription added meanwhile must not change
    the lists it is walking."""
    table = _Snapshots()
    table["t/+"] = [("first", 0)]
    (matched,) = table.matching("t/1", _matches)
    table["t/+"].append(("second", 0))
    assert [("first", 0)] == matched

"""docs/protocol.md and docs/asyncapi.yaml against the code: neither may drift from it.

The AsyncAPI document and the examples of docs/protocol.md must be what ``protocol.asyncapi``
generates now; every hex example must decode, with the protocol's own decoders, to exactly the
JSON printed beside it; every error code the page names must exist in the code and every code
in the code must be on the page; every message type must be documented.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

from protocol import asyncapi, codec, game, messages

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "protocol.md"
YAML = ROOT / "docs" / "asyncapi.yaml"
NAMESPACES = (
    "protocol|limit|lobby|table|rules|variant|notation|server|store|replay|engine|auth|client"
)
CODE_IN_SOURCE = re.compile(rf'"((?:{NAMESPACES})/[a-z_]+)"')
CODE_IN_DOC = re.compile(rf"`((?:{NAMESPACES})/[a-z_]+)`")
EXAMPLE = re.compile(r"<!-- example: (\w+) -->\n```hex\n(.*?)```\n```json\n(.*?)```", re.DOTALL)
GENERATOR = ROOT / "protocol" / "asyncapi.py"
"""Holds example error codes, so it is no evidence that a code exists."""


def _doc() -> str:
    return DOC.read_text()


def _doc_examples() -> list[tuple[str, str, str]]:
    return [
        (decoder, hex_text, json_text) for decoder, hex_text, json_text in EXAMPLE.findall(_doc())
    ]


def _section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def _typed(value: Any) -> Any:
    """``value`` with every scalar tagged by its type, so 1, 1.0 and True are all different."""
    if isinstance(value, dict):
        return {key: _typed(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_typed(item) for item in value]
    return (type(value).__name__, value)


def _source_codes() -> set[str]:
    """Every error code written in the protocol's and the server's sources."""
    codes: set[str] = set()
    for package in ("protocol", "server"):
        for path in (ROOT / package).rglob("*.py"):
            if path != GENERATOR:
                codes.update(CODE_IN_SOURCE.findall(path.read_text()))
    return codes


def _structs(module: Any) -> list[type[msgspec.Struct]]:
    return [
        kind
        for _, kind in inspect.getmembers(module, inspect.isclass)
        if issubclass(kind, msgspec.Struct) and kind.__module__ == module.__name__
    ]


def _tag(kind: type[msgspec.Struct]) -> str | None:
    tag = msgspec.inspect.type_info(kind)
    assert isinstance(tag, msgspec.inspect.StructType)
    return tag.tag if isinstance(tag.tag, str) else None


# (a) The AsyncAPI document ----------------------------------------------------------------------


def test_asyncapi_yaml_is_what_the_code_generates() -> None:
    """docs/asyncapi.yaml is up to date (``python -m protocol.asyncapi`` rewrites it)."""
    expected = asyncapi.to_yaml(asyncapi.build_document())
    assert expected == YAML.read_text(), "stale: run `python -m protocol.asyncapi`"


def test_asyncapi_yaml_parses_back_to_the_document() -> None:
    """The hand-written YAML emitter writes YAML that a YAML parser reads as the document."""
    yaml = pytest.importorskip("yaml")
    assert asyncapi.build_document() == yaml.safe_load(YAML.read_text())


def test_asyncapi_check_passes_on_the_committed_file() -> None:
    """``python -m protocol.asyncapi --check`` exits 0 on the files as committed."""
    assert 0 == asyncapi.main(["--check"])
    assert 0 == asyncapi.main(["--check", "--examples"])


def test_asyncapi_check_fails_on_a_stale_file(tmp_path: Path) -> None:
    """``--check`` exits 1, and writes nothing, when the file differs from the generated one."""
    stale = tmp_path / "asyncapi.yaml"
    stale.write_text("asyncapi: 3.0.0\n")
    assert 1 == asyncapi.main(["--check", "--output", str(stale)])
    assert "asyncapi: 3.0.0\n" == stale.read_text()


def test_asyncapi_references_all_resolve() -> None:
    """Every ``$ref`` of the document points at something in it."""
    document = asyncapi.build_document()

    def walk(value: Any) -> list[str]:
        if isinstance(value, dict):
            found = [value["$ref"]] if isinstance(value.get("$ref"), str) else []
            return found + [ref for item in value.values() for ref in walk(item)]
        if isinstance(value, list):
            return [ref for item in value for ref in walk(item)]
        return []

    refs = walk(document)
    assert refs
    for ref in refs:
        target: Any = document
        for part in ref.removeprefix("#/").split("/"):
            assert isinstance(target, dict)
            assert part in target, f"{ref} does not resolve"
            target = target[part]


def test_asyncapi_has_every_topic_and_every_schema() -> None:
    """One channel per topic of protocol.topics, and a schema for every message Struct."""
    document = asyncapi.build_document()
    addresses = {channel["address"] for channel in document["channels"].values()}
    assert {
        "ramino/v1/lobby/{shard}/{client}",
        "ramino/v1/table/{table}/cmd/{client}",
        "ramino/v1/presence/{client}",
        "ramino/v1/inbox/{client}",
        "ramino/v1/table/{table}/events",
        "ramino/v1/table/{table}/state",
        "ramino/v1/table/{table}/chat",
        "ramino/v1/tables/{table}",
        "ramino/v1/server/status",
    } == addresses
    schemas = set(document["components"]["schemas"])
    structs = {kind.__name__ for kind in _structs(messages) + _structs(game)}
    assert set() == structs - schemas


@pytest.mark.parametrize(
    "value",
    [
        {"on": "yes", "no": None, "y": True, "null": 1.5, "a b": [], "$ref": "#/x"},
        {"text": "line one\nline two\n\nafter a blank", "spaced": " lead", "trail": "x\ny "},
        {"nested": [[1, [2, {}]], {"k": [{"deep": "…: # 'quoted' \"too\""}]}], "empty": {}},
        ["a", {"b": "c", "d": ["e"]}, "multi\nline"],
    ],
)
def test_yaml_emitter_round_trips(value: Any) -> None:
    """Awkward keys and strings (YAML words, ``: #``, quotes, line breaks) survive the emitter."""
    yaml = pytest.importorskip("yaml")
    assert value == yaml.safe_load(asyncapi.to_yaml(value))


# (b) The examples -------------------------------------------------------------------------------


def test_examples_section_is_what_the_code_generates() -> None:
    """§17 of docs/protocol.md is up to date (``python -m protocol.asyncapi --examples``)."""
    text = _doc()
    expected = asyncapi.replace_section(text, "examples", asyncapi.render_examples())
    assert expected == text, "stale: run `python -m protocol.asyncapi --examples`"


def test_every_generated_example_is_in_the_doc() -> None:
    """The page shows as many hex examples as the generator makes (the pattern finds them)."""
    assert len(asyncapi.examples()) == len(_doc_examples())


@pytest.mark.parametrize(
    ("decoder", "hex_text", "json_text"),
    _doc_examples(),
    ids=[f"{index}-{example[0]}" for index, example in enumerate(_doc_examples())],
)
def test_hex_example_decodes_to_the_json_beside_it(
    decoder: str, hex_text: str, json_text: str
) -> None:
    """The protocol's decoder takes the bytes; they hold exactly the printed JSON (types too);
    and encoding the decoded message gives the same bytes back."""
    payload = bytes.fromhex(hex_text)
    shown = json.loads(json_text)
    message = asyncapi.DECODERS[decoder](payload)
    assert _typed(shown) == _typed(msgspec.msgpack.decode(payload))
    assert _typed(shown) == _typed(msgspec.to_builtins(message))
    assert payload == codec.encode(message)


def test_examples_cover_every_tagged_type() -> None:
    """Every command, event, result and message with a ``type`` tag has an example."""
    shown: set[str] = set()

    def collect(value: Any) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("type"), str):
                shown.add(value["type"])
            for item in value.values():
                collect(item)
        elif isinstance(value, list):
            for item in value:
                collect(item)

    for _, _, json_text in _doc_examples():
        collect(json.loads(json_text))
    tags = {_tag(kind) for kind in _structs(messages) + _structs(game)} - {None}
    assert set() == tags - shown


# (c) Error codes and message types --------------------------------------------------------------


def test_every_code_the_doc_names_exists() -> None:
    """No error code in docs/protocol.md is made up (or left over after a rename)."""
    documented = set(CODE_IN_DOC.findall(_doc()))
    assert documented
    assert set() == documented - _source_codes()


def test_every_code_in_the_sources_is_in_the_error_table() -> None:
    """§14 lists every error code the protocol and the server define."""
    listed = set(CODE_IN_DOC.findall(_section(_doc(), "14. Error codes")))
    assert set() == _source_codes() - listed


def test_the_codes_the_brief_names_are_sent_by_the_server() -> None:
    """The codes every client meets are in the table of codes the server sends."""
    sent = _section(_doc(), "14. Error codes").split("### Defined, but not expected")[0]
    listed = set(CODE_IN_DOC.findall(sent))
    assert {
        "protocol/malformed",
        "protocol/invalid",
        "protocol/version",
        "protocol/wrong_topic",
        "limit/payload",
        "limit/rate",
        "limit/chat_rate",
        "lobby/bad_invite",
        "table/stale_seq",
        "rules/not_your_turn",
        "server/internal",
    } <= listed


@pytest.mark.parametrize(
    "kind",
    _structs(messages) + _structs(game),
    ids=lambda kind: kind.__name__,
)
def test_every_message_type_is_documented(kind: type[msgspec.Struct]) -> None:
    """Each Struct of protocol.messages and protocol.game is named on the page, by its class
    name or its ``type`` tag, and each of its fields is mentioned."""
    text = _doc()
    tag = _tag(kind)
    assert f"`{kind.__name__}`" in text or (tag is not None and f"`{tag}`" in text)
    for field in msgspec.structs.fields(kind):
        assert f"`{field.encode_name}" in text or f"{field.encode_name}:" in text, field.name

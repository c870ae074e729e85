"""The Python types against the JSON contract, which Rust defines once
(``src/schema.rs``) and the binary prints (``hlomem schema CMD``):
every field a class declares exists in its schema definition with a
compatible type, and real output validates against the schemas."""

from __future__ import annotations

import json
import subprocess
import types
import typing
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import tomllib

import hlomem
from hlomem._json import JsonObject, _field_types

# Every typed class the package exports.
TYPED = [
    cls
    for cls in vars(hlomem).values()
    if isinstance(cls, type) and issubclass(cls, JsonObject) and cls._schema is not None
]


def _schema(document: str) -> dict[str, Any]:
    out = subprocess.run(
        [hlomem.find_binary(), "schema", document], check=True, capture_output=True
    )
    schema: dict[str, Any] = json.loads(out.stdout)
    return schema


SCHEMAS = {doc: _schema(doc) for doc in ("analyze", "check", "explain", "targets", "fits")}


def _definition(document: str, name: str) -> dict[str, Any]:
    schema = SCHEMAS[document]
    return schema if name == "" else schema["$defs"][name]


def _resolve(document: str, node: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """A property's schema, through a `$ref`: (definition name or None, schema)."""
    ref = node.get("$ref")
    if ref is None:
        return None, node
    name = ref.removeprefix("#/$defs/")
    return name, _definition(document, name)


def _alternatives(node: dict[str, Any]) -> list[dict[str, Any]]:
    for key in ("anyOf", "oneOf"):
        if key in node:
            return list(node[key])
    return [node]


def _json_types(document: str, node: dict[str, Any]) -> set[str]:
    """The JSON types a schema node allows (objects behind `$ref`s included)."""
    found: set[str] = set()
    for alternative in _alternatives(node):
        _, target = _resolve(document, alternative)
        if target is not alternative:
            found |= _json_types(document, target)
            continue
        kind = alternative.get("type")
        if isinstance(kind, list):
            found |= set(kind)
        elif isinstance(kind, str):
            found.add(kind)
        elif "const" in alternative:
            found.add(type(alternative["const"]).__name__.replace("str", "string"))
        elif any(k in alternative for k in ("anyOf", "oneOf")):
            found |= _json_types(document, alternative)
    return found


def _strip_none(hint: Any) -> tuple[Any, bool]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        assert len(args) == 1, f"unions other than `X | None` are not declared: {hint}"
        return args[0], len(args) != len(typing.get_args(hint))
    return hint, False


def _check(document: str, where: str, hint: Any, node: dict[str, Any]) -> None:
    """Fails unless values of `node` read as `hint` (recursively)."""
    hint, optional = _strip_none(hint)
    allowed = _json_types(document, node)
    assert ("null" in allowed) == optional, f"{where}: nullable in the schema iff declared `| None`"
    allowed.discard("null")
    simple = {int: {"integer"}, str: {"string"}, bool: {"boolean"}, float: {"number", "integer"}}
    if hint in simple:
        assert allowed and allowed <= simple[hint], f"{where}: {hint} but schema {allowed}"
        return
    if typing.get_origin(hint) is list:
        assert allowed == {"array"}, f"{where}: list but schema {allowed}"
        (item,) = typing.get_args(hint)
        array = next(a for a in _alternatives(node) if _json_types(document, a) >= {"array"})
        _check(document, f"{where}[]", item, array["items"])
        return
    assert isinstance(hint, type) and issubclass(hint, JsonObject), f"{where}: {hint}"
    assert allowed == {"object"}, f"{where}: object but schema {allowed}"
    if hint._schema is not None:
        refs = {_resolve(document, a)[0] for a in _alternatives(node)} - {None}
        assert refs == {hint._schema[1]}, f"{where}: {hint.__name__} is not {refs}"


@pytest.mark.parametrize("cls", TYPED, ids=lambda c: c.__name__)
def test_declared_fields_exist_in_the_schema(cls: type[JsonObject]) -> None:
    assert cls._schema is not None
    document, name = cls._schema
    definition = _definition(document, name)
    properties = definition["properties"]
    required = set(definition.get("required", []))
    fields = _field_types(cls)
    assert fields, f"{cls.__name__} declares no field"
    for field, hint in fields.items():
        where = f"{cls.__name__}.{field} ({document} {name or 'root'})"
        assert field in properties, f"{where}: not in the schema"
        _check(document, where, hint, properties[field])
        # A declared field is always there, or reads as its empty value
        # (the JSON leaves out some empty lists and nulls).
        optional, is_list = _strip_none(hint)[1], typing.get_origin(_strip_none(hint)[0]) is list
        assert field in required or optional or is_list, f"{where}: may be missing"


def test_every_definition_the_package_names_is_typed() -> None:
    """The typed classes cover the documents' main objects."""
    named = {cls._schema for cls in TYPED}
    for wanted in [
        ("analyze", "ModuleReport"),
        ("analyze", "Totals"),
        ("analyze", "FindingReport"),
        ("check", ""),
        ("explain", ""),
    ]:
        assert wanted in named


def _validate(document: str, instance: Any) -> None:
    schema = SCHEMAS[document]
    validator = jsonschema.validators.validator_for(schema)
    validator.check_schema(schema)
    validator(schema).validate(instance)


def test_real_output_validates(step_nodonate: Any, step_donate: Any, repo_root: Path) -> None:
    for compiled in (step_nodonate, step_donate):
        report = hlomem.analyze(compiled)
        document = {"schema_version": 1, "modules": [report.to_json()], "errors": []}
        _validate("analyze", document)
        result = hlomem.assert_fits(compiled, budget="1GiB", fail_on=["HM002"])
        _validate("check", result.to_json())
    message = (repo_root / "samples/oom/motivating.txt").read_text()
    _validate("explain", hlomem.explain(message).to_json())


def test_the_checked_in_schema_is_the_binarys(repo_root: Path) -> None:
    """schema/*.schema.json (what the docs link) is what this binary prints."""
    for document, schema in SCHEMAS.items():
        checked_in = json.loads((repo_root / f"schema/{document}.schema.json").read_text())
        assert checked_in == schema, "regenerate: HLOMEM_UPDATE_SCHEMA=1 cargo test schema"


def test_versions_agree(repo_root: Path) -> None:
    """One version: the crate's, which maturin gives the package and clap the binary."""
    cargo = tomllib.loads((repo_root / "Cargo.toml").read_text())["package"]["version"]
    pyproject = tomllib.loads((repo_root / "pyproject.toml").read_text())["project"]
    assert "version" not in pyproject and "version" in pyproject["dynamic"]
    if hlomem.__version__ == "0+unknown":
        # Imported from a checkout (PYTHONPATH=python), not installed: the
        # package has no version of its own then; .ci/run installs it.
        pytest.skip("hlomem is imported from a checkout, not installed")
    assert hlomem.__version__ == cargo
    out = subprocess.run([hlomem.find_binary(), "--version"], check=True, capture_output=True)
    assert out.stdout.decode().strip() == f"hlomem {cargo}"

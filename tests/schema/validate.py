#!/usr/bin/env python3
"""Validates cuflight newline-delimited JSON against the event JSON Schema (draft 2020-12).

usage: validate.py SCHEMA_DIR FILE [--expect valid|invalid] [--allow-unknown-types]

Every line of FILE must be valid UTF-8, one strict JSON object (no NaN/Infinity, no raw control
characters), and valid against SCHEMA_DIR/index.json, which dispatches on `type` to the event's own
schema. Unless --allow-unknown-types, `type` must also be one the index names.

--expect valid (default): exit 0 iff every line is valid.
--expect invalid: exit 0 iff every line is invalid (checks that the schema rejects bad lines).
Exit 2 on a usage or schema-file problem.
"""

import argparse
import json
import pathlib
import sys

try:
    import jsonschema
    from jsonschema import Draft202012Validator
except ImportError as e:
    print(f"validate.py: cannot import jsonschema with {sys.executable}: {e}", file=sys.stderr)
    sys.exit(2)


def load_schemas(schema_dir):
    store = {}
    index = None
    for path in sorted(pathlib.Path(schema_dir).glob("*.json")):
        schema = json.loads(path.read_text(encoding="utf-8"))
        Draft202012Validator.check_schema(schema)
        store[schema["$id"]] = schema
        if path.name == "index.json":
            index = schema
    if index is None:
        raise ValueError(f"no index.json in {schema_dir}")
    known = {branch["if"]["properties"]["type"]["const"] for branch in index["allOf"]}
    resolver = jsonschema.RefResolver.from_schema(index, store=store)
    return Draft202012Validator(index, resolver=resolver), known


def reject_constant(name):
    raise ValueError(f"non-finite number {name}")


def check_line(validator, known, raw, allow_unknown):
    """Returns None if `raw` (bytes, without its newline) is a valid event, else the reason."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"invalid UTF-8: {e}"
    if "\r" in text:
        return "raw carriage return in line"
    try:
        event = json.loads(text, parse_constant=reject_constant)
    except ValueError as e:
        return f"not JSON: {e}"
    if not isinstance(event, dict):
        return "not a JSON object"
    errors = sorted(validator.iter_errors(event), key=lambda err: list(err.absolute_path))
    if errors:
        err = errors[0]
        where = "/".join(str(p) for p in err.absolute_path) or "(root)"
        return f"{where}: {err.message[:200]}"
    if not allow_unknown and event.get("type") not in known:
        return f"unknown type {event.get('type')!r}"
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("schema_dir")
    parser.add_argument("file")
    parser.add_argument("--expect", choices=["valid", "invalid"], default="valid")
    parser.add_argument("--allow-unknown-types", action="store_true")
    args = parser.parse_args()

    try:
        validator, known = load_schemas(args.schema_dir)
    except (OSError, ValueError, KeyError, jsonschema.SchemaError) as e:
        print(f"validate.py: bad schema directory {args.schema_dir}: {e}", file=sys.stderr)
        return 2

    data = pathlib.Path(args.file).read_bytes()
    if not data:
        print(f"validate.py: {args.file} is empty", file=sys.stderr)
        return 1
    if not data.endswith(b"\n"):
        print(f"validate.py: {args.file} does not end with a newline", file=sys.stderr)
        return 1
    failures = 0
    lines = data[:-1].split(b"\n")
    for number, raw in enumerate(lines, start=1):
        problem = check_line(validator, known, raw, args.allow_unknown_types)
        if args.expect == "valid" and problem is not None:
            failures += 1
            print(f"{args.file}:{number}: invalid: {problem}", file=sys.stderr)
        elif args.expect == "invalid" and problem is None:
            failures += 1
            print(f"{args.file}:{number}: valid but expected invalid: {raw[:300]!r}",
                  file=sys.stderr)
    print(f"validate.py: {len(lines)} lines, {failures} unexpected (expect {args.expect})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

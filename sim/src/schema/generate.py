#!/usr/bin/env python3
"""Writes compute_v1.txt: the fields of the Compute Engine v1 request bodies the simulator takes,
as Google's official Rust client declares them (its model is generated from Compute's discovery
document; the crate names the document's revision). Nothing here comes from our own code.

Source: the crate google-cloud-compute-v1 (the version Cargo.lock pins) in Cargo's registry:
  * src/model/deserialize.rs: each message's JSON field names (the `match value { "jsonName" =>
    Ok(__FieldTag::__rust_name) ...}` of its Deserialize impl; names it does not list go to
    `_unknown_fields`);
  * src/model.rs: each field's Rust type (`Option<T>`, `Vec<T>`, `HashMap<String, T>`), where a
    `T` that has a field-tag Deserialize impl is a message and anything else a scalar or an enum.

Usage: python3 sim/src/schema/generate.py [--check] [path/to/google-cloud-compute-v1-X.Y.Z]
(default: the version the workspace's Cargo.lock pins, in $CARGO_HOME/registry/src). --check
compares with the committed file instead of writing it (exit 1 when it differs).

`generate.py --python` reads nothing of the crate: run by a Python that has the official Python
client (google-cloud-compute, scripts/requirements.txt), it checks the committed file against
that client's proto descriptors instead, a second source: the same fields in every message, and
each message field's proto name the snake_case of its JSON name, as schema.rs writes paths.
"""

import glob
import os
import re
import sys

# The request bodies the simulator takes, by their message in the model: instances.insert,
# instances.bulkInsert and regionInstances.bulkInsert, instanceTemplates.insert.
ROOTS = ["Instance", "BulkInsertInstanceResource", "InstanceTemplate"]
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compute_v1.txt")


def crate_dir(args):
    """The crate's sources: the directory given, or the version Cargo.lock pins, in Cargo's registry."""
    if args:
        return args[0]
    lock = os.path.join(os.path.dirname(OUT), "../../../Cargo.lock")
    with open(lock) as f:
        version = re.search(r'name = "google-cloud-compute-v1"\nversion = "([^"]+)"', f.read()).group(1)
    home = os.environ.get("CARGO_HOME", os.path.expanduser("~/.cargo"))
    found = glob.glob(os.path.join(home, f"registry/src/*/google-cloud-compute-v1-{version}"))
    if not found:
        sys.exit(f"google-cloud-compute-v1 {version} is not in Cargo's registry: run cargo fetch")
    return found[0]


def json_names(text):
    """Message path (`Instance`, `instance_list::Warning`) -> [(json name, rust field)]."""
    out = {}
    impls = re.split(r"\nimpl<'de> serde::de::Deserialize<'de>\s+for super::", text)
    for block in impls[1:]:
        path = re.match(r"[\w:]+", block).group(0)
        if "enum __FieldTag" not in block:
            continue
        visit = block[block.index("fn visit_str") :]
        visit = visit[: visit.index("deserializer.deserialize_identifier")]
        fields = re.findall(r'"([^"]+)"\s*=>\s*\{?\s*Ok\(__FieldTag::__(\w+)\)', visit)
        out[path] = fields
    return out


def rust_types(text):
    """Struct path -> {rust field: type text}, from the model's struct definitions."""
    out = {}
    mods = []  # (indent, name)
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^(\s*)pub mod (\w+) \{$", line)
        if m:
            mods.append((len(m.group(1)), m.group(2)))
            i += 1
            continue
        m = re.match(r"^(\s*)\}$", line)
        if m and mods and mods[-1][0] == len(m.group(1)):
            mods.pop()
            i += 1
            continue
        m = re.match(r"^(\s*)pub struct (\w+) \{$", line)
        if m:
            indent = m.group(1)
            path = "::".join([n for _, n in mods] + [m.group(2)])
            fields = {}
            i += 1
            while lines[i] != indent + "}":
                f = re.match(r"^\s*pub (?:r#)?(\w+):(.*)$", lines[i])
                if f:
                    ty = f.group(2)
                    while not ty.rstrip().endswith(",") or ty.count("<") != ty.count(">"):
                        i += 1
                        ty += lines[i].strip()
                    fields[f.group(1)] = re.sub(r"\s+", "", ty.rstrip().rstrip(",")).replace(",>", ">")
                i += 1
            out[path] = fields
        i += 1
    return out


def kind(ty, messages):
    """`T`, `[T]`, `{T}` for a message T (once, a list, a map); `.`, `[.]`, `{.}` for scalars."""
    def inner(t):
        m = re.fullmatch(r"crate::model::([\w:]+)", t)
        return m.group(1) if m and m.group(1) in messages else "."
    if not ty.startswith("std::"):
        sys.exit(f"a field type not understood: {ty}")
    m = re.fullmatch(r"std::option::Option<(.*)>", ty)
    if m:
        ty = m.group(1)
    m = re.fullmatch(r"std::vec::Vec<(.*)>", ty)
    if m:
        return "[" + inner(m.group(1)) + "]"
    m = re.fullmatch(r"std::collections::HashMap<std::string::String,(.*)>", ty)
    if m:
        return "{" + inner(m.group(1)) + "}"
    return inner(ty)


def against_python():
    """Checks the committed file against the official Python client's descriptors."""
    from google.cloud import compute_v1

    def snake(name):
        return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()

    wrong = []
    with open(OUT) as f:
        rows = [line.split() for line in f if not line.startswith("//")]
    for msg, *fields in rows:
        descriptor = getattr(compute_v1, msg.split("::")[-1]).pb().DESCRIPTOR
        proto = {f.json_name: f.name for f in descriptor.fields}
        ours = {f.split(":")[0]: ":" in f for f in fields}
        if set(ours) != set(proto):
            wrong.append(f"{msg}: {sorted(set(ours) ^ set(proto))}")
        wrong += [f"{msg}.{j}: {proto[j]}" for j, m in ours.items() if m and proto.get(j, snake(j)) != snake(j)]
    print("\n".join(wrong) or f"compute_v1.txt agrees with the Python client's {len(rows)} messages")
    sys.exit(1 if wrong else 0)


def main():
    if "--python" in sys.argv[1:]:
        against_python()
    args = [a for a in sys.argv[1:] if a != "--check"]
    crate = crate_dir(args)
    version = os.path.basename(crate.rstrip("/"))
    with open(os.path.join(crate, "src/lib.rs")) as f:
        revision = re.search(r'generated from the "(\d+)" revision', f.read()).group(1)
    with open(os.path.join(crate, "src/model/deserialize.rs")) as f:
        names = json_names(f.read())
    with open(os.path.join(crate, "src/model.rs")) as f:
        types = rust_types(f.read())
    rows, todo, seen = [], list(ROOTS), set()
    while todo:
        msg = todo.pop(0)
        if msg in seen:
            continue
        seen.add(msg)
        # Every field of the struct has its JSON name, and no name is left over.
        assert {r for _, r in names[msg]} == set(types[msg]) - {"_unknown_fields"}, msg
        fields = []
        for json_name, rust in names[msg]:
            k = kind(types[msg][rust], names)
            fields.append(json_name if k == "." else f"{json_name}:{k}")
            t = k.strip("[]{}")
            if t != ".":
                todo.append(t)
        rows.append(f"{msg} " + " ".join(fields))
    text = "\n".join(
        [
            "//! Compute Engine v1 request bodies, field by field: generated by generate.py from the",
            f"//! official Rust client's model, {version} (Compute discovery revision {revision}). Do not edit.",
            f"//! A line: a message, then its JSON fields; `f:T` a message T, `f:[T]` a list of them, `f:{{T}}` a",
            f"//! map of them; `[.]` and `{{.}}` lists and maps of scalars; a bare name a scalar or an enum.",
            f"//! Roots: {' '.join(ROOTS)}.",
        ]
        + rows
    ) + "\n"
    if "--check" in sys.argv[1:]:
        with open(OUT) as f:
            same = f.read() == text
        print("compute_v1.txt is up to date" if same else "compute_v1.txt differs: run generate.py")
        sys.exit(0 if same else 1)
    with open(OUT, "w") as f:
        f.write(text)
    print(f"wrote {OUT}: {len(rows)} messages from {version}")


if __name__ == "__main__":
    main()

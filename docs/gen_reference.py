"""Write the generated reference pages at build time (mkdocs-gen-files).

Nothing here is written by hand: the spec fields come from the JSON Schemas the
package ships (``biasaudit schema``), the run files' fields from theirs, the API
keys from the provider registry, and the exit codes from the exception tree.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import mkdocs_gen_files

import biasaudit.errors
from biasaudit.providers import KNOWN_PROVIDERS

SCHEMAS = Path(biasaudit.__file__).parent / "data" / "schemas"


def _type(field: dict[str, Any]) -> str:
    if "enum" in field:
        return " \\| ".join(f"`{v}`" for v in field["enum"])
    if "const" in field:
        return f"`{field['const']}`"
    if "anyOf" in field:
        return " or ".join(_type(part) for part in field["anyOf"])
    if "$ref" in field:
        return field["$ref"].rsplit("/", 1)[-1]
    kind = field.get("type", "any")
    if kind == "array":
        return f"list of {_type(field.get('items', {}))}"
    bounds = [f"{word} {field[key]}" for key, word in (("minimum", "≥"), ("exclusiveMinimum", ">"),
              ("maximum", "≤"), ("exclusiveMaximum", "<")) if key in field]  # fmt: skip
    return kind + (f" ({', '.join(bounds)})" if bounds else "")


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _fields_table(schema: dict[str, Any]) -> list[str]:
    required = set(schema.get("required", []))
    lines = ["| field | type | default | what it is |", "| --- | --- | --- | --- |"]
    for name, field in schema.get("properties", {}).items():
        default = "required" if name in required else f"`{json.dumps(field.get('default'))}`"
        lines.append(
            f"| `{name}` | {_cell(_type(field))} | {_cell(default)} | "
            f"{_cell(field.get('description', ''))} |"
        )
    return lines


def _section(title: str, schema: dict[str, Any]) -> list[str]:
    """A schema's heading, its description and the table of its fields."""
    description = _cell(schema.get("description", "")).strip()
    return [f"## {title}", "", description, "", *_fields_table(schema), ""]


def spec_page() -> str:
    spec = json.loads((SCHEMAS / "spec.json").read_text(encoding="utf-8"))
    out = [
        "# Spec fields",
        "",
        "Every field a spec file (`biasaudit run SPEC.yaml`) may set, by spec class, as the "
        "shipped JSON Schema gives them (`biasaudit schema spec`); the command line sets the "
        "same fields as `--field-name`. Generated from `src/biasaudit/data/schemas/spec.json`.",
        "",
    ]
    for name, schema in spec["$defs"].items():
        out += _section(name, schema)
    return "\n".join(out)


def run_files_page() -> str:
    out = [
        "# Run files: fields",
        "",
        "The fields of each run file, from the JSON Schemas biasaudit ships "
        "(`biasaudit schema`); [the run directory](run-directory.md) says what each file is.",
        "",
    ]
    for path in sorted(SCHEMAS.glob("*.json")):
        if path.name == "spec.json":
            continue
        out += _section(f"`{path.stem}`", json.loads(path.read_text(encoding="utf-8")))
    return "\n".join(out)


def environment_page() -> str:
    out = [
        "# Environment variables",
        "",
        "| variable | what it does |",
        "| --- | --- |",
        "| `BIASAUDIT_DEBUG=1` | the command line re-raises errors with a full traceback "
        "instead of one line |",
        "| `BIASAUDIT_LOG=info`, `BIASAUDIT_LOG=debug` | log retries (and at `debug` the "
        "SDKs' requests) to stderr, through the redacting filter |",
        "| `BIASAUDIT_PRICES=FILE` | a YAML of model prices over the shipped ones "
        "(as `--prices`) |",
        "| `BIASAUDIT_COST_NOTICE=DOLLARS` | an estimate above this (default 1) is printed "
        "before a run starts |",
        "| `BIASAUDIT_LEASE_SECONDS=S` | how long a claim on a request in a shared cache "
        "lasts unrenewed (default 120) |",
        "| `NO_COLOR` | tables and progress without colour |",
        "| `OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL` | without `--base-url`: the same API at "
        "another address (the SDKs' own variables) |",
        "| `OPENAI_API_VERSION` | `azure/`: the `api-version` of a deployment's URL (the "
        "v1 API takes none) |",
        "| `HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY` | a forward proxy for every "
        "host but this machine's own (`localhost`, `127.0.0.1`, `[::1]` are reached "
        "directly); a malformed one is refused in one line naming it |",
        "| `SSL_CERT_FILE`, `SSL_CERT_DIR` | the certificates that `https://` servers are "
        "checked against; one that cannot be loaded is refused before anything is sent |",
        "| `MPLCONFIGDIR` | matplotlib's settings folder for the reports' figures (default: "
        "a folder of this user's in the temporary directory) |",
        "",
        "## API keys, by provider",
        "",
        "The key a provider reads unless `--api-key-env NAME` names another. Keys are never "
        "written to the cache, a run directory, a log line or a report.",
        "",
        "| provider | key variable |",
        "| --- | --- |",
    ]
    for name, known in sorted(KNOWN_PROVIDERS.items()):
        key = known.key_env
        out.append(f"| `{name}/` | {f'`{key}`' if key else 'none'} |")
    return "\n".join(out) + "\n"


def exit_codes_page() -> str:
    tree = (biasaudit.errors.__doc__ or "").split("::", 1)[1].split("Messages never", 1)[0]
    return "\n".join(
        [
            "# Exit codes and errors",
            "",
            "| code | meaning |",
            "| --- | --- |",
            "| 0 | done: every request answered (`compare`: whatever it found; `reaudit`: no "
            "change that `--fail-on` names) |",
            "| 1 | done, but some requests failed or the run stopped early (what arrived is "
            "kept); `replay`: the figures differ |",
            "| 3 | `reaudit --fail-on drift, version or any`: the change it names was found "
            "(a scheduled job's alarm) |",
            "| 2 | a usage error: a bad option, spec or input file (named by file, line and "
            "field), a missing key; nothing was sent |",
            "| 130 | interrupted by Ctrl-C (143 by SIGTERM, 129 by SIGHUP: 128 and the "
            "signal's number); the run is marked interrupted and every answer received is in "
            "the cache |",
            "",
            "Every error biasaudit raises on purpose is one class of this tree "
            "(`biasaudit.errors`); the command line turns it into one line and the code:",
            "",
            "```text",
            tree.strip("\n"),
            "```",
            "",
        ]
    )


def cli_page() -> str:
    """docs/cli_reference.py's page (a sibling file: mkdocs runs this script by path)."""
    path = Path(__file__).with_name("cli_reference.py")
    spec = importlib.util.spec_from_file_location("cli_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    page: str = module.cli_page()
    return page


for name, text in (
    ("reference/cli.md", cli_page()),
    ("reference/spec.md", spec_page()),
    ("reference/run-files.md", run_files_page()),
    ("reference/environment.md", environment_page()),
    ("reference/exit-codes.md", exit_codes_page()),
):
    with mkdocs_gen_files.open(name, "w") as handle:
        handle.write(text)

"""The generated parts of the reference pages, read from the code when the site is built
(`docs/hooks.py` puts each where its page says `<!-- generated: NAME -->`): every setting of
the shared extraction file and of a recipe, every command of the `tokenmill` command line, and
every asset of the code location."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import html
import inspect
import json
import re
import tempfile
import types
import typing
import warnings
from pathlib import Path
from typing import Any

PROJECT_DIR = Path(__file__).resolve().parents[1]
CODE_SPAN = re.compile(r"(`[^`]*`)")
REQUIRED = object()  # the default of a setting that has none


def generated(name: str) -> str:
    pages = {"settings": settings_reference, "cli": cli_reference, "assets": assets_reference}
    if name not in pages:
        raise KeyError(f"no generated reference named {name!r}; known: {sorted(pages)}")
    with warnings.catch_warnings():  # Dagster's own use of pydantic's deprecated API
        warnings.simplefilter("ignore", DeprecationWarning)
        return pages[name]()


# -- shared by the pages ------------------------------------------------------------------------


def cell(text: Any) -> str:
    """Text for a Markdown table cell or paragraph: on one line, its `|` and HTML characters
    escaped outside code spans (`<name>` is text, not a tag)."""
    pieces = CODE_SPAN.split(" ".join(str(text).split()))
    for index in range(0, len(pieces), 2):  # (a table's cells split at no `|` in code)
        pieces[index] = html.escape(pieces[index], quote=False).replace("|", "\\|")
    return "".join(pieces)


def code(text: Any) -> str:
    return cell(f"`{text}`")


def table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def relative(path: str | Path) -> str:
    with contextlib.suppress(ValueError):
        return str(Path(path).resolve().relative_to(PROJECT_DIR))
    return str(path)


# -- settings -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Setting:
    name: str
    kind: Any
    default: Any
    description: str


def setting_rows(kind: type) -> list[Setting]:
    """The settings of a settings dataclass or of a recipe's typed list item (a Dagster
    config class): name, type, default, description."""
    if dataclasses.is_dataclass(kind):
        from tokenmill.runtime.stage import settings_fields

        hints = typing.get_type_hints(kind)
        return [
            Setting(name, hints[name], default, description)
            for name, _, default, description in settings_fields(kind)
        ]
    return [
        Setting(
            name,
            field.annotation,
            REQUIRED if field.is_required() else field.get_default(call_default_factory=True),
            field.description or "",
        )
        for name, field in kind.model_fields.items()
    ]


def nested_kind(setting: Setting) -> type | None:
    """The type of a setting that holds settings of its own (a filter's thresholds), or of
    each item of a list of mappings (classifier rules, plug-in filters)."""
    from tokenmill.data_assets.recipe import CONFIG_TYPES

    if dataclasses.is_dataclass(setting.kind):
        return setting.kind
    if setting.name in CONFIG_TYPES:
        return typing.get_args(CONFIG_TYPES[setting.name])[0]
    return None


def type_text(kind: Any) -> str:
    if typing.get_origin(kind) is typing.Literal:
        return "one of " + ", ".join(code(a) for a in typing.get_args(kind))
    return code(type_name(kind))


def type_name(kind: Any) -> str:
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is not None:
        return f"{origin.__name__}[{', '.join(type_name(a) for a in args)}]"
    return "null" if kind is type(None) else getattr(kind, "__name__", str(kind))


def default_text(setting: Setting) -> str:
    if setting.default is REQUIRED:
        return "required"
    if dataclasses.is_dataclass(setting.default):
        return "see below"
    return code(json.dumps(setting.default))


def settings_section(
    path: str, kind: type, level: int, heading: str = "", intro: str = ""
) -> list[str]:
    """A heading naming the YAML path, what it configures, the type's own description, a table
    of its settings, then a section of each setting that holds settings of its own."""
    parts = [f"{'#' * level} `{path}`{heading}", *filter(None, (intro, own_docstring(kind)))]
    rows, nested = [], []
    for setting in setting_rows(kind):
        inner = nested_kind(setting)
        if inner is None:
            shown = type_text(setting.kind)
        elif inner is setting.kind:
            shown = "mapping (below)"
            nested.append((f"{path}.{setting.name}", inner, ""))
        else:
            shown = "list of mappings (below)"
            nested.append((f"{path}.{setting.name}", inner, ", each item"))
        rows.append((code(setting.name), shown, default_text(setting), cell(setting.description)))
    parts.append(table(("Setting", "Type", "Default", "Description"), rows))
    for inner_path, inner, title in nested:
        parts += settings_section(inner_path, inner, level + 1, title)
    return parts


def own_docstring(kind: type) -> str:
    """A class's docstring, unless it is the signature a dataclass is given for one."""
    doc = kind.__doc__ or ""
    return "" if doc.startswith(f"{kind.__name__}(") else inspect.cleandoc(doc)


DEPLOYED = (
    "The deployment's tokenizer: the `tokenizer` of every recipe without a tokenizer section of "
    "its own, or with the same settings (see "
    "[Recipes](../concepts/recipes.md#tokenization-tokenizer-tokenize))."
)


def settings_reference() -> str:
    from tokenmill.recipes import project as recipes
    from tokenmill.recipes.catalog import recipe_stages, shared_stages
    from tokenmill.recipes.recipe import section
    from tokenmill.tokens.tokenization import DeploymentTokenizerSettings

    files = (
        (
            "The shared extraction file",
            f"`{relative(recipes.SHARED_SETTINGS)}`, or the file `{recipes.SHARED_ENV}` names: "
            "the settings of the stages every recipe shares.",
            shared_stages(),
        ),
        (
            "A recipe",
            f"Each file in `{relative(recipes.RECIPES_DIR)}/` (or in the folders and files "
            f"`{recipes.RECIPES_ENV}` names): one dataset's settings.",
            recipe_stages(),
        ),
    )
    parts = []
    for title, where, stages in files:
        parts += [f"## {title}", where]
        by_settings: dict[type, list[str]] = {}
        for stage in stages:
            if stage.settings:
                by_settings.setdefault(stage.settings, []).append(stage.name)
        for kind, names in by_settings.items():
            configures = "Configures " + ", ".join(f"`{n}`" for n in names) + "."
            parts += settings_section(section(kind), kind, 3, intro=configures)
        if stages and stages[0].shared:
            parts += settings_section("tokenizer", DeploymentTokenizerSettings, 3, intro=DEPLOYED)
    return "\n\n".join(parts) + "\n"


# -- command line -------------------------------------------------------------------------------


def subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, help, parser) of each command, in the order `tokenmill --help` lists them."""
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [(c.dest, c.help or "", action.choices[c.dest]) for c in action._choices_actions]


def option_rows(parser: argparse.ArgumentParser) -> list[tuple[str, str, str]]:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        name = ", ".join(action.option_strings) or action.dest
        if action.option_strings and action.nargs != 0:
            name += f" {action.metavar or action.dest.upper()}"
        required = action.required and action.option_strings
        if action.default is None or action.nargs == 0:
            default = "required" if required else ""
        else:
            default = code(action.default)
        about = action.help or ""
        if isinstance(action, argparse._AppendAction):
            about += " (may be repeated)"
        rows.append((code(name), default, cell(about)))
    return rows


def usage(parser: argparse.ArgumentParser) -> str:
    parser.formatter_class = functools.partial(argparse.HelpFormatter, width=96)
    return "```text\n" + parser.format_usage().strip() + "\n```"


def cli_reference() -> str:
    from tokenmill.cli.main import command_parser

    parser = command_parser()
    parts = [cell(parser.description)]
    for name, about, sub in subcommands(parser):
        parts += [
            f"## `tokenmill {name}`",
            cell(about[:1].upper() + about[1:]) + ".",
            usage(sub),
        ]
        rows = option_rows(sub)
        if rows:
            parts.append(table(("Argument", "Default", "Description"), rows))
    return "\n\n".join(parts) + "\n"


# -- assets -------------------------------------------------------------------------------------


def condition_text(condition: Any) -> str:
    """An automation condition as an expression of its labelled parts."""
    if condition.get_label():
        return condition.get_label()
    children = [condition_text(c) for c in condition.children]
    kind = type(condition).__name__
    if kind == "OrAutomationCondition":
        return "(" + " | ".join(children) + ")"
    if kind == "AndAutomationCondition":
        return "(" + " & ".join(children) + ")"
    if kind == "NotAutomationCondition":
        return "~" + children[0]
    if children:
        return f"{condition.name.lower()}({', '.join(children)})"
    return condition.name


def reported_metadata() -> list[str]:
    """The metadata keys every stage's materialization reports, whatever its counts."""
    from tokenmill.data_assets.results import stage_result

    from tokenmill.storage.lake import Lake
    from tokenmill.storage.outputs import StageReport

    with tempfile.TemporaryDirectory() as scratch:
        return list(stage_result(StageReport(), Lake.from_url(scratch), "stage").metadata)


def code_location():
    """The Definitions of the project's own recipes and shared extraction file, as a code
    location without TOKENMILL_RECIPES or TOKENMILL_EXTRACTION builds them."""
    from tokenmill.data_assets.datasets import Catalog
    from tokenmill.resources.lake import LakeResource

    from tokenmill.definitions import build_definitions
    from tokenmill.recipes import project as recipes

    with contextlib.chdir(PROJECT_DIR):  # the recipes' paths as the page shows them
        catalog = Catalog.load(relative(recipes.RECIPES_DIR), relative(recipes.SHARED_SETTINGS))
    return build_definitions(LakeResource(url=str(PROJECT_DIR / "lake")), recipes=catalog)


def asset_rows(node) -> list[tuple[str, str]]:
    from tokenmill.data_assets.k8s import STAGE_RESOURCES

    rows = [
        ("Group", code(node.group_name)),
        ("Partitions", cell(node.partitions_def or "none: one output")),
        ("Computed", "materialized" if node.is_materializable else "observed"),
    ]
    if node.parent_keys:
        parents = sorted(k.to_user_string() for k in node.parent_keys)
        rows.append(("Depends on", ", ".join(code(p) for p in parents)))
    if node.kinds:
        rows.append(("Kinds", ", ".join(code(k) for k in sorted(node.kinds))))
    if node.check_keys:
        rows.append(("Checks", ", ".join(code(k.name) for k in sorted(node.check_keys))))
    if node.automation_condition:
        rows.append(("Automation condition", code(condition_text(node.automation_condition))))
    else:
        rows.append(("Automation condition", "none"))
    if node.backfill_policy:
        rows.append(("Backfill policy", code(node.backfill_policy)))
    if node.is_materializable and node.key.path[-1] in STAGE_RESOURCES:
        resources = STAGE_RESOURCES[node.key.path[-1]]
        sizes = (
            f"{kind}: {amounts['cpu']} CPU, {amounts['memory']}"
            for kind, amounts in resources.items()
        )
        rows.append(("Pod (Kubernetes)", "; ".join(sizes)))
    schema = node.metadata.get("dagster/column_schema")
    if schema:
        columns = getattr(schema, "schema", schema).columns  # a metadata value or the schema
        rows.append(("Columns", ", ".join(code(c.name) for c in columns)))
    return rows


def assets_reference() -> str:
    graph = code_location().resolve_asset_graph()
    parts = [
        "Every materialization of a stage's asset reports "
        + ", ".join(code(k) for k in reported_metadata())
        + "; besides these, a `dropped <reason>` and a `drop_rate <reason>` for each reason it "
        "dropped records for, and the stage's own counts."
    ]
    for key in graph.toposorted_asset_keys:
        node = graph.get(key)
        parts += [f"## `{key.to_user_string()}`", cell(node.description or "")]
        parts.append(table(("Property", "Value"), asset_rows(node)))
    return "\n\n".join(parts) + "\n"

"""The layout's import rules (ARCHITECTURE.md), read from the source: who may import whom.

Imports are read with ``ast``: those a module runs when it is imported (at its
top level, outside ``if TYPE_CHECKING``) make the graph that must have no
cycle; every import, top level or inside a function, counts for the rules of
who may import whom.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import biasaudit
from biasaudit.kinds import KINDS

PACKAGE = Path(biasaudit.__file__).parent
KIND_FOLDERS = tuple(module.split(".")[2] for module in KINDS.values())
"""Each kind's folder under ``kinds/``, as the registry lists them."""
MAX_TOP_LEVEL_MODULES = 12


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(target: str) -> str | None:
    """The package's module an import names (the longest known prefix)."""
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target or None


def imports(path: Path, *, load_time_only: bool) -> set[str]:
    """The package's modules ``path`` imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                if not load_time_only:
                    visit(child, top)
                continue
            nested = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.ImportFrom) and child.module and (top or not load_time_only):
                if child.module == "biasaudit" or child.module.startswith("biasaudit."):
                    for alias in child.names:  # `from biasaudit.x import y`: y may be a module
                        whole = _resolve(f"{child.module}.{alias.name}")
                        found.add(whole or _resolve(child.module) or child.module)
            elif isinstance(child, ast.Import) and (top or not load_time_only):
                for alias in child.names:
                    if alias.name.startswith("biasaudit"):
                        found.add(_resolve(alias.name) or alias.name)
            visit(child, top and not nested)

    visit(tree, True)
    found.discard(module_name(path))
    return {m for m in found if m != "biasaudit"}


def test_metrics_import_nothing_else_of_the_package() -> None:
    for name, path in MODULES.items():
        if name.startswith("biasaudit.metrics"):
            outside = {m for m in imports(path, load_time_only=False)
                       if not m.startswith("biasaudit.metrics")}  # fmt: skip
            assert not outside, (name, outside)


def test_probes_import_only_the_provider_types_errors_and_text_helpers() -> None:
    allowed = ("biasaudit.probes", "biasaudit.providers", "biasaudit.errors", "biasaudit.textfiles")
    for name, path in MODULES.items():
        if name.startswith("biasaudit.probes"):
            outside = {m for m in imports(path, load_time_only=False)
                       if not m.startswith(allowed)}  # fmt: skip
            assert not outside, (name, outside)


# The list of kinds (``kinds/__init__``), which loads nothing: the sim reads it to find
# each kind's responder, as the registry does.
KIND_LIST = "biasaudit.kinds"


def test_providers_import_only_the_foundations() -> None:
    """Providers sit on the foundations alone: no store, engine, probe, kind or report,
    not even the list of kinds (the local model's servers take their process helpers
    from ``processes``; the sim reads the responders the kinds registered with
    ``sim_responders``, a leaf)."""
    foundations = ("biasaudit.providers", "biasaudit.errors", "biasaudit.secrets",
                   "biasaudit.textfiles", "biasaudit.processes", "biasaudit.sim_responders")  # fmt: skip
    for name, path in MODULES.items():
        if name.startswith("biasaudit.providers"):
            outside = {m for m in imports(path, load_time_only=False)
                       if not m.startswith(foundations)}  # fmt: skip
            assert not outside, (name, outside)


def test_the_kinds_stand_below_the_reading_of_a_spec() -> None:
    """``spec`` reads a spec of any task through the registry; the kinds build their
    specs on ``kinds/runspec`` and never import ``spec`` back."""
    for name, path in MODULES.items():
        if name.startswith("biasaudit.kinds"):
            assert "biasaudit.spec" not in imports(path, load_time_only=False), name


def test_the_list_of_kinds_loads_nothing() -> None:
    """The list of kinds loads nothing but the leaf it registers the sim's responders
    with, which loads nothing of biasaudit."""
    assert imports(MODULES[KIND_LIST], load_time_only=False) <= {"biasaudit.sim_responders"}
    assert imports(MODULES["biasaudit.sim_responders"], load_time_only=False) == set()


@pytest.mark.parametrize("wing", ["engine", "store", "providers", "metrics", "probes"])
def test_the_lower_wings_name_no_audit_kind(wing: str) -> None:
    kinds = ("biasaudit.kinds", "biasaudit.spec", "biasaudit.reports",
             "biasaudit.cli", "biasaudit.replay")  # fmt: skip
    for name, path in MODULES.items():
        if name.startswith(f"biasaudit.{wing}"):
            upward = {m for m in imports(path, load_time_only=False)
                      if m.startswith(kinds)}  # fmt: skip
            assert not upward, (name, upward)


def test_the_providers_hold_no_kind_of_their_own() -> None:
    """Each kind's prompts are answered by the responder in its folder: the sim names
    no kind, no task and none of their prompts' shapes."""
    tree = ast.parse((PACKAGE / "providers" / "sim.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):  # docstrings point to the kinds; the code may not
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            body[0] = ast.Pass()  # type: ignore[index]
    code = ast.unparse(tree)
    for word in ("Option ", "ruted", "listwise", "pairwise", "grade", "occupation", "Candidate"):
        assert word not in code, word


def test_a_kinds_responder_stands_on_the_sim_alone() -> None:
    """A kind's ``sim.py`` answers from the planted world: the providers and the
    foundations, nothing of the pipeline (so that a provider built in a worker process
    loads no run, report or store)."""
    allowed = ("biasaudit.providers", "biasaudit.errors", "biasaudit.textfiles")
    for folder in KIND_FOLDERS:
        path = PACKAGE / "kinds" / folder / "sim.py"
        outside = {m for m in imports(path, load_time_only=False) if not m.startswith(allowed)}
        assert not outside, (folder, outside)


@pytest.mark.parametrize("kind", KIND_FOLDERS)
def test_no_kind_imports_another(kind: str) -> None:
    """Kinds meet in ``kinds.common``, ``kinds.prompt`` and ``kinds.candidates``, never in
    each other's folders."""
    others = tuple(f"biasaudit.kinds.{k}" for k in KIND_FOLDERS if k != kind)
    for name, path in MODULES.items():
        if name.startswith(f"biasaudit.kinds.{kind}"):
            crossing = {m for m in imports(path, load_time_only=False) if m.startswith(others)}
            assert not crossing, (name, crossing)


def test_the_shared_candidates_import_no_kind() -> None:
    """``kinds.candidates`` is what several kinds build on: it reaches none of them."""
    kinds = tuple(f"biasaudit.kinds.{k}" for k in KIND_FOLDERS)
    for name, path in MODULES.items():
        if name.startswith("biasaudit.kinds.candidates"):
            reached = {m for m in imports(path, load_time_only=False)
                       if m.startswith((*kinds, "biasaudit.kinds.registry"))}  # fmt: skip
            assert not reached, (name, reached)


def test_loading_a_kinds_module_never_loads_the_registry() -> None:
    """The registry imports every kind; a kind reaching it back, even through the
    reports kit, would be a cycle waiting for the next import to close it."""
    graph = {name: imports(path, load_time_only=True) for name, path in MODULES.items()}
    for name in MODULES:
        if not name.startswith("biasaudit.kinds.") or name == "biasaudit.kinds.registry":
            continue
        seen, todo = set(), [name]
        while todo:
            for other in graph.get(todo.pop(), ()):
                if other not in seen:
                    seen.add(other)
                    todo.append(other)
        assert "biasaudit.kinds.registry" not in seen, name


def test_no_module_imports_itself_back_when_it_loads() -> None:
    graph = {name: imports(path, load_time_only=True) for name, path in MODULES.items()}
    done: set[str] = set()

    def walk(name: str, trail: list[str]) -> None:
        if name in trail:
            cycle = [*trail[trail.index(name) :], name]
            pytest.fail("import cycle: " + " -> ".join(cycle))
        if name in done:
            return
        for other in sorted(graph.get(name, ())):
            walk(other, [*trail, name])
        done.add(name)

    for name in sorted(graph):
        walk(name, [])


def test_the_top_level_holds_at_most_a_dozen_modules() -> None:
    top = sorted(
        p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py")
    )
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


def test_importing_the_metrics_loads_no_engine_and_no_sdk() -> None:
    code = (
        "import json, sys, biasaudit.metrics; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith("
        "('biasaudit', 'openai', 'anthropic', 'asyncio_throttle', 'httpx', 'tenacity')))))"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                       text=True, check=True).stdout)  # fmt: skip
    allowed = ("biasaudit", "biasaudit._version")  # the package and its version
    assert all(m in allowed or m.startswith("biasaudit.metrics") for m in loaded), loaded


def test_loading_the_kinds_and_their_metrics_loads_no_scipy() -> None:
    """SciPy takes over a second to load: the registry, every kind's run and metrics
    modules and the allocation statistics import it where a figure needs it."""
    modules = ["biasaudit.kinds.registry", "biasaudit.kinds.allocation.run",
               "biasaudit.kinds.allocation.metrics_file", "biasaudit.metrics._units"]  # fmt: skip
    code = (
        f"import json, sys; import {', '.join(modules)}; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('scipy'))))"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                       text=True, check=True).stdout)  # fmt: skip
    assert loaded == [], loaded[:5]


def test_the_kit_stands_below_the_kinds_and_the_pages_above() -> None:
    """``render/`` (the kit every kind draws with) imports no kind and no page; a kind
    imports no page (``reports/``) and nothing private of the kit."""
    for name, path in MODULES.items():
        reached = imports(path, load_time_only=False)
        if name.startswith("biasaudit.render"):
            assert not {m for m in reached if m.startswith(("biasaudit.kinds",
                                                            "biasaudit.reports"))}, name  # fmt: skip
        if not name.startswith("biasaudit.kinds"):
            continue
        assert not {m for m in reached if m.startswith("biasaudit.reports")}, name
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "biasaudit.render"
            ):
                module = node.module or ""
                private = [a.name for a in node.names if a.name.startswith("_")]
                assert not private and "._" not in module, (name, module, private)


def test_outside_the_kinds_no_module_imports_a_kinds_folder() -> None:
    """The command line, the reports, replay and pricing reach a kind through the
    registry only, so a new kind needs no edit outside ``kinds/``. (The package's
    public surface names what it exports, lazily, and is left out.)"""
    folders = tuple(f"biasaudit.kinds.{kind}" for kind in KIND_FOLDERS)
    for name, path in MODULES.items():
        if name.startswith("biasaudit.kinds") or name == "biasaudit":
            continue
        reached = {m for m in imports(path, load_time_only=False) if m.startswith(folders)}
        assert not reached, (name, reached)


NOTHING_TO_GIVE = {
    "grade-score": ("shown_names", "unit_decisions"),  # a judge's options carry no names
    "ruted": ("shown_names", "unit_decisions"),  # occupations, no decisions about a person
}
"""The optional steps a shipped kind has nothing for."""


def _steps() -> list[str]:
    """The steps of the kind contract: the methods of ``declare.Kind`` a kind gives."""
    from biasaudit.kinds.declare import Kind

    builders = {"declares", "run_blocks", "owns"}
    return [name for name in vars(Kind) if callable(vars(Kind)[name])
            and not name.startswith("_") and name not in builders]  # fmt: skip


def test_a_kind_imports_each_step_from_its_own_folder() -> None:
    """A kind.py loads nothing but its specs when imported, and each step's method imports
    the module of its own folder that does it: a real import a reader (and mypy) follows."""
    for folder in KIND_FOLDERS:
        tree = ast.parse((PACKAGE / "kinds" / folder / "kind.py").read_text(encoding="utf-8"))
        home = f"biasaudit.kinds.{folder}"
        at_load = {node.module for node in tree.body if isinstance(node, ast.ImportFrom)}
        assert at_load <= {"__future__", "collections.abc", "pathlib", "typing",
                           "biasaudit.kinds.declare", home, f"{home}.spec"}, (folder, at_load)  # fmt: skip
        (declared,) = [node for node in tree.body if isinstance(node, ast.ClassDef)]
        for method in declared.body:
            if isinstance(method, ast.FunctionDef):
                found = [n.module for n in ast.walk(method) if isinstance(n, ast.ImportFrom)]
                assert found and all(m and m.startswith(f"{home}.") for m in found), (
                    folder, method.name, found)  # fmt: skip


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_gives_every_step_with_the_contracts_parameters(kind: str) -> None:
    import importlib
    import inspect

    from pydantic import BaseModel

    from biasaudit.kinds._rounds import Growth
    from biasaudit.kinds.declare import Kind
    from biasaudit.kinds.registry import audit_kind
    from biasaudit.providers.sim import Responder

    declared = audit_kind(kind)
    for name in _steps():
        # the shipped kinds leave none out but those with nothing to give
        assert declared.declares(name) or name in NOTHING_TO_GIVE.get(kind, ()), name
        given = list(inspect.signature(getattr(declared, name)).parameters)
        assert given == list(inspect.signature(getattr(Kind, name)).parameters)[1:], name
    assert issubclass(declared.metrics_model(), BaseModel)
    assert isinstance(declared.responder(), Responder)
    assert issubclass(declared.score_options() or int, BaseModel)
    # each spec that grows has the fields its growth names
    power = importlib.import_module(f"{type(declared).__module__.rpartition('.')[0]}.power")
    chosen = ("GROWTH", "CANDIDATES_GROWTH", "PAIRWISE_GROWTH")  # a chooser's growths
    growths = [getattr(power, n) for n in chosen if hasattr(power, n)]
    assert growths
    for growth in growths:
        assert isinstance(growth, Growth)
        grown = [s for s in declared.specs if growth.size in s.model_fields]
        assert grown and all({"until", growth.step} <= set(s.model_fields) for s in grown)
    assert set(declared.commands) <= {info.name for info in declared.task_infos()}


def test_the_engine_picks_a_fan_out_strategy_and_sends_nothing_itself() -> None:
    """Sending lives in the strategies behind ``types.FanOut`` (as httpx keeps its
    transports): the engine's core keeps the cache front and picks one."""
    import inspect

    from biasaudit.engine import sending, strategies

    tree = ast.parse((PACKAGE / "engine" / "core.py").read_text(encoding="utf-8"))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                for alias in node.names} | {node.module for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom)}  # fmt: skip
    for sending_part in ("tenacity", "asyncio_throttle", "worker_pool", "BatchRunner"):
        assert sending_part not in imported, sending_part
    for strategy in (sending.InProcess, *(getattr(strategies, n) for n in strategies.__all__)):
        assert list(inspect.signature(strategy.send).parameters) == ["self", "todo"], strategy

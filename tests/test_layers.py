"""The import graph of the three packages keeps DESIGN's layers: the language (`hidet_lang`) imports neither the code
generator nor the operators, except through its lazy facade (names given on first use, by their homes' names) and
the explorer (an application over all three); the code generator imports no operator; the operators enter the code
generator through its faces (`codegen`, `codegen.emit`, `codegen.toolchain`, `codegen.runtime`), taking the names
they give, never a module behind them. Every import is read, those inside functions too."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("hidet_lang", "codegen", "stdlib_ops")
CODEGEN_FACES = ("codegen", "codegen.emit", "codegen.toolchain", "codegen.runtime")
LANGUAGE_EXCEPTIONS = ("hidet_lang/__init__.py", "hidet_lang/explorer/")


def module_name(path: Path) -> str:
    """The dotted name of the module at `path` (a file of one of the packages)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> list[tuple[int, str, tuple[str, ...]]]:
    """Every import of the module at `path`: (line, the module imported from, the names taken; none for `import
    m`), relative imports resolved."""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.append((node.lineno, module, tuple(alias.name for alias in node.names)))
    return found


def is_module(dotted: str) -> bool:
    """Whether `dotted` names a module or package of the tree."""
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def project_files(package: str) -> list[Path]:
    """The Python files of `package`."""
    return sorted((ROOT / package).rglob("*.py"))


def arrows(package: str, to: tuple[str, ...]) -> list[str]:
    """`file:line: module` for each import in `package` of a module of the packages `to`."""
    return [f"{path.relative_to(ROOT)}:{line}: {module}"
            for path in project_files(package) for line, module, _ in imports_of(path)
            if module.split(".")[0] in to]


def test_the_tree_is_read() -> None:
    assert all(len(project_files(package)) > 20 for package in PACKAGES)
    assert any(module == "codegen.runtime" for _, module, _ in imports_of(ROOT / "stdlib_ops/tensor.py"))


def test_the_language_reaches_the_packages_above_it_only_through_its_facade() -> None:
    found = [arrow for arrow in arrows("hidet_lang", ("codegen", "stdlib_ops")) if not arrow.startswith(
        LANGUAGE_EXCEPTIONS)]
    assert not found, "hidet_lang imports a package above it:\n" + "\n".join(found)


def test_the_code_generator_imports_no_operator() -> None:
    found = arrows("codegen", ("stdlib_ops",))
    assert not found, "codegen imports stdlib_ops:\n" + "\n".join(found)


def test_the_operators_enter_the_code_generator_through_its_faces() -> None:
    found = []
    for path in project_files("stdlib_ops"):
        for line, module, names in imports_of(path):
            if module.split(".")[0] != "codegen":
                continue
            behind = [name for name in names if is_module(f"{module}.{name}")]
            if module not in CODEGEN_FACES or behind:
                found.append(f"{path.relative_to(ROOT)}:{line}: {module} {' '.join(behind)}".rstrip())
    assert not found, "imports past the code generator's faces:\n" + "\n".join(found)


def test_the_faces_give_what_the_operators_take() -> None:
    """Every name the operators take from a face is one the face gives (a wrong name would fail only when used)."""
    for path in project_files("stdlib_ops"):
        for _, module, names in imports_of(path):
            if module in CODEGEN_FACES:
                face = importlib.import_module(module)
                assert all(hasattr(face, name) for name in names), (path, module, names)


# ------------------------------------------------------------------------------------------- the import graph

ALLOWED_CYCLE_EDGES = {
    ("hidet_lang.ir.node", "hidet_lang.ir.printer"):
        "`Node.__str__` prints through the printer, which reads every node type (a function-level import)",
}
"""Imports that close a cycle, by (importer, imported module), with the reason each stays."""

MOST_FUNCTION_IMPORTS = 15
"""The most imports of a project module inside functions the three packages may hold (each says why on its line)."""

def runtime_imports(path: Path) -> list[tuple[int, str, bool, bool]]:
    """The imports of project modules that run when the module at `path` loads or its functions run (those under
    `if TYPE_CHECKING:` left out): (line, the module imported, whether inside a function, whether a comment is on
    its lines). `from package import name` imports the submodule `name` where there is one."""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    found: list[tuple[int, str, bool, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for other in child.orelse:
                    visit_one(other, in_function)
                continue
            visit_one(child, in_function)

    def visit_one(node: ast.AST, in_function: bool) -> None:
        if isinstance(node, ast.Import | ast.ImportFrom):
            commented = any("#" in line for line in lines[node.lineno - 1:node.end_lineno])
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                base = package[: len(package) - node.level + 1] if node.level else []
                module = ".".join([*base, *([node.module] if node.module else [])])
                modules = [f"{module}.{alias.name}" if is_module(f"{module}.{alias.name}") else module
                           for alias in node.names]
            found.extend((node.lineno, module, in_function, commented) for module in dict.fromkeys(modules)
                         if module.split(".")[0] in PACKAGES)
        visit(node, in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))

    visit(ast.parse(source), False)
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports (at load or in its functions, not for type checking only); a package
    imports the submodules its `__init__` does."""
    graph: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in project_files(package):
            name = module_name(path)
            graph.setdefault(name, set()).update(
                module for _, module, _, _ in runtime_imports(path) if module != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph.get(successor, ())))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def test_cycles_are_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_imports_form_a_cycle() -> None:
    """Modules import each other in one direction only, function-level imports included: a piece that two modules
    need lives below both, and a pass takes a class it only annotates under `if TYPE_CHECKING:`."""
    graph = import_graph()
    assert all(imported in graph.get(importer, ()) for importer, imported in ALLOWED_CYCLE_EDGES), \
        "an allowed edge is no longer imported; take it off ALLOWED_CYCLE_EDGES"
    for importer, imported in ALLOWED_CYCLE_EDGES:
        graph[importer] = graph[importer] - {imported}
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(component) for component in found)


def test_function_level_imports_say_why_and_are_few() -> None:
    inside = [(f"{path.relative_to(ROOT)}: {module}", line, commented)
              for package in PACKAGES for path in project_files(package)
              for line, module, in_function, commented in runtime_imports(path) if in_function]
    unexplained = sorted(f"{where} (line {line})" for where, line, commented in inside if not commented)
    assert not unexplained, ("a function-level import says why on its line (`# ...`):\n" + "\n".join(unexplained))
    assert len(inside) <= MOST_FUNCTION_IMPORTS, (
        f"{len(inside)} function-level imports of project modules (at most {MOST_FUNCTION_IMPORTS}): import at the "
        "top, moving what two modules share below both:\n" + "\n".join(where for where, _, _ in inside))

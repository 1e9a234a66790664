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

"""The experiment's modules import one another without cycles (lazy imports inside functions
included): plan and recipe at the bottom, the driver paper_table at the top."""

import ast
from pathlib import Path

import rl.experiment

PACKAGE = Path(rl.experiment.__file__).parent


def _imports() -> dict[str, set[str]]:
    graph = {}
    for path in PACKAGE.glob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rl.experiment."):
                deps.add(node.module.rsplit(".", 1)[1])
            elif isinstance(node, ast.Import):
                deps |= {a.name.rsplit(".", 1)[1] for a in node.names if a.name.startswith("rl.experiment.")}
        graph[path.stem] = deps
    return graph


def test_no_import_cycles_inside_the_experiment_package():
    graph = _imports()
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, f"import cycle: {' -> '.join((*path, module))}"
        if module in done:
            return
        for dep in graph.get(module, ()):
            visit(dep, (*path, module))
        done.add(module)

    for module in graph:
        visit(module, ())
    assert graph["plan"] <= {"recipe"} and not graph["recipe"]

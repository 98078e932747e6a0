"""capture <- workbench <- app: capture never imports Harbor, Gradio or workbench."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN_IN_CAPTURE = {"harbor", "gradio", "gradio_client", "workbench", "app"}


def imported_top_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_capture_never_imports_harbor_gradio_or_workbench():
    files = sorted((ROOT / "capture").rglob("*.py"))
    assert files, "capture/ has no modules"
    offenders = {
        str(f.relative_to(ROOT)): sorted(imported_top_modules(f) & FORBIDDEN_IN_CAPTURE)
        for f in files
    }
    assert {f: m for f, m in offenders.items() if m} == {}


def test_workbench_never_imports_app():
    offenders = [
        str(f.relative_to(ROOT))
        for f in sorted((ROOT / "workbench").rglob("*.py"))
        if "app" in imported_top_modules(f)
    ]
    assert offenders == []

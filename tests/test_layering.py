"""Imports point down the package layers of DESIGN.md, with no cycles and no hidden late imports.

Every module's imports are read from its syntax tree (function-level ones included), so an import
that only runs inside a function counts like any other. The layer order is the data below; the
entry points in LAUNCH_LAYERS are held to a layer too (evaluating a run needs no training code).
"""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "grounding_jax"
# Lower layers never import higher ones. `rewards` is the old home of get_reward, a re-export above
# recipes. Within a layer, packages may import each other, as long as no cycle forms. `rl` sits above
# `eval` (its validation runs the evaluation harness) and `sft`, which share the model-level parts
# (models/logprobs.py) and so never import the RL loop.
LAYERS = (
    ("parallel", "optim", "checksums", "checkpoints", "metrics_writer", "paths", "perf", "ceilings", "config_fields"),
    ("models",),
    ("text",),
    ("data",),
    ("sampling", "tools"),
    ("judges",),
    ("recipes",),
    ("eval", "sft", "rewards"),
    ("rl",),
)
LAYER = {name: i for i, names in enumerate(LAYERS) for name in names}
LAUNCH = ROOT.parent / "launch"
LAUNCH_LAYERS = {"evaluate.py": "eval"}  # entry point -> the highest package it may import


def _module_name(path: pathlib.Path) -> str:
  parts = path.relative_to(ROOT.parent).with_suffix("").parts
  return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _imports(name: str, path: pathlib.Path):
  """(imported module, line, at top level?) for each import of a grounding_jax module."""
  tree = ast.parse(path.read_text())
  top = {id(node) for node in tree.body}
  for node in tree.body:  # imports in a top-level try/except (optional extras) count as top level
    if isinstance(node, ast.Try):
      top |= {id(n) for n in node.body}
  package = name if path.name == "__init__.py" else name.rpartition(".")[0]
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      targets = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
      # `from pkg import mod` imports the module pkg.mod when there is one.
      targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
    else:
      continue
    for target in targets:
      if target == "grounding_jax" or target.startswith("grounding_jax."):
        yield target, node.lineno, id(node) in top


def _package(module: str) -> str:
  parts = module.split(".")
  return parts[1] if len(parts) > 1 else ""


def test_every_package_has_a_layer():
  unknown = sorted({_package(m) for m in MODULES} - set(LAYER) - {""})
  assert not unknown, f"add {unknown} to LAYERS in {__file__}"


def test_imports_point_down_and_are_at_module_level():
  problems = []
  for name, path in MODULES.items():
    for target, line, at_top in _imports(name, path):
      src, dst = _package(name), _package(target)
      if src and dst and LAYER[dst] > LAYER[src]:
        problems.append(f"{path}:{line}: {src} (layer {LAYER[src]}) imports {target} "
                        f"(layer {LAYER[dst]})")
      if not at_top:
        problems.append(f"{path}:{line}: imports {target} inside a function; import it at the top "
                        "(late imports are only for optional third-party packages)")
  assert not problems, "\n".join(problems)


@pytest.mark.parametrize("script", sorted(LAUNCH_LAYERS))
def test_entry_points_import_at_most_their_layer(script):
  path = LAUNCH / script
  top = LAYER[LAUNCH_LAYERS[script]]
  problems = [f"{path}:{line}: imports {target} (layer {LAYER[_package(target)]}); {script} may "
              f"import up to {LAUNCH_LAYERS[script]} (layer {top})"
              for target, line, _ in _imports(path.stem, path)
              if _package(target) and LAYER[_package(target)] > top]
  assert not problems, "\n".join(problems)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
  """Strongly connected components with more than one node (Tarjan)."""
  index, low, stack, on, out = {}, {}, [], set(), []

  def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    on.add(v)
    for w in graph.get(v, ()):
      if w not in index:
        visit(w)
        low[v] = min(low[v], low[w])
      elif w in on:
        low[v] = min(low[v], index[w])
    if low[v] == index[v]:
      comp = []
      while True:
        w = stack.pop()
        on.discard(w)
        comp.append(w)
        if w == v:
          break
      if len(comp) > 1:
        out.append(sorted(comp))

  for v in sorted(graph):
    if v not in index:
      visit(v)
  return out


def test_no_import_cycles_between_packages_or_modules():
  packages: dict[str, set[str]] = {}
  modules: dict[str, set[str]] = {}
  for name, path in MODULES.items():
    for target, _, _ in _imports(name, path):
      if _package(name) and _package(target) and _package(name) != _package(target):
        packages.setdefault(_package(name), set()).add(_package(target))
      if target in MODULES and target != name and not name.startswith(target + "."):
        modules.setdefault(name, set()).add(target)  # a submodule importing its own package is fine
  assert not _cycles(packages), _cycles(packages)
  assert not _cycles(modules), _cycles(modules)


@pytest.mark.parametrize("src,dst,ok", [("rl", "recipes", True), ("recipes", "rl", False),
                                        ("text", "data", False), ("data", "text", True),
                                        ("rl", "eval", True), ("eval", "rl", False),
                                        ("sft", "rl", False), ("sft", "models", True)])
def test_the_layer_table_encodes_design(src, dst, ok):
  assert (LAYER[dst] <= LAYER[src]) == ok

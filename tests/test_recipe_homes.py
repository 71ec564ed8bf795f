"""One home per recipe: grounding_jax/recipes/<folder>/ is the only code that names its recipe.

(a) No string constant (read from the syntax tree, so docstrings and comments that mention a paper do
    not count, and a name inside a longer string such as "grace_hotpotqa" does not either) equals a
    registered recipe or reward name in grounding_jax/ outside recipes/, or in launch/. Code below
    recipes/ gets what it needs from the Recipe object (judge styles, report footnote, data mixes);
    a launch script takes the name from a flag or a config, or iterates over available_recipes().
    Inside recipes/, a name appears only in the folder of the recipe it names (a reward variant
    such as "<recipe>_binary" belongs to its recipe's folder); the registry, base.py and gold.py name
    none. configs/, tests/ and docs/ choose recipes, so they may name them.
(b) Each registered recipe is defined in recipes/<folder>/, and its name is the folder's, or starts
    with the folder's and "_" (one folder may register several recipes: a paper's training stages).
"""

import ast
import fnmatch
import pathlib

import pytest

from grounding_jax import recipes

REPO = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = REPO / "grounding_jax"
RECIPES_DIR = PACKAGE / "recipes"

# (file pattern, name) -> why those files may hold the name as a constant. Keep it short: every entry
# is a place a reader has to know about.
ALLOWED = {
    # The config's defaults: a stage's recipe and the reward function when a config names none. They
    # belong to the config (issue 33 part 4 declares each field once); drop them there to drop this.
    ("grounding_jax/rl/config*.py", "naive"): "the default recipe of rl/config.py's stage() and reward",
    ("grounding_jax/data/construct.py", "grace"): (
        "GRACE §3.1's balanced context construction: a --grace_mode value and the salt of its seeds, "
        "so every built dataset depends on it; it names the data method, not the recipe"),
    ("grounding_jax/data/construct.py", "naive"): (
        "GRACE Table 5's 'naive' construction (an ablation of the data, not the naive recipe): a "
        "--grace_mode value and the salt of its seeds"),
}


def _home(recipe: recipes.Recipe) -> str:
  """The recipes/ subfolder whose module defines the recipe's class ("" if none)."""
  parts = type(recipe).__module__.split(".")
  if parts[:2] != ["grounding_jax", "recipes"] or len(parts) < 4:
    return ""
  return parts[2]


def _owners() -> dict[str, str]:
  """Registered recipe and reward name -> the folder of the recipe that owns it."""
  owners = {}
  for name in recipes.available_recipes():
    recipe = recipes.get_recipe(name)
    owners[name] = _home(recipe)
    for variant in recipe.reward_variants:
      owners[variant] = _home(recipe)
  assert set(owners) == set(recipes.available_rewards())
  return owners


def _string_constants(path: pathlib.Path):
  for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
      yield node.value, node.lineno


def _allowed(rel: str, name: str) -> bool:
  return any(n == name and fnmatch.fnmatch(rel, pattern) for pattern, n in ALLOWED)


def _files():
  yield from sorted(PACKAGE.rglob("*.py"))
  yield from sorted((REPO / "launch").rglob("*.py"))


def test_recipe_names_appear_only_in_their_recipes_folder():
  owners = _owners()
  problems = []
  for path in _files():
    rel = path.relative_to(REPO).as_posix()
    folder = path.relative_to(RECIPES_DIR).parts[0] if path.is_relative_to(RECIPES_DIR) else None
    for value, line in _string_constants(path):
      if value not in owners or _allowed(rel, value):
        continue
      if folder is not None and folder == owners[value]:
        continue
      where = f"recipes/{owners[value]}/" if owners[value] else "its recipe's folder"
      problems.append(f"{rel}:{line}: the string {value!r} names a recipe; only {where} may name it "
                      "(take it from the Recipe object, a flag or available_recipes())")
  assert not problems, "\n".join(problems)


def test_allowed_exceptions_are_still_needed():
  owners = _owners()
  for (pattern, name), why in ALLOWED.items():
    assert name in owners, f"{name!r} is no longer registered; drop ALLOWED[{pattern!r}, {name!r}]"
    holders = [p for p in _files() if fnmatch.fnmatch(p.relative_to(REPO).as_posix(), pattern)
               and name in {v for v, _ in _string_constants(p)}]
    assert holders, f"no file matching {pattern} holds {name!r}; drop its ALLOWED entry ({why})"


@pytest.mark.parametrize("name", recipes.available_recipes())
def test_each_recipe_lives_in_its_own_folder(name):
  recipe = recipes.get_recipe(name)
  home = _home(recipe)
  assert home, (f"recipe {name!r} is defined in {type(recipe).__module__}; define it in "
                "grounding_jax/recipes/<folder>/")
  assert (RECIPES_DIR / home / "__init__.py").is_file()
  assert name == home or name.startswith(home + "_"), (
      f"recipe {name!r} lives in recipes/{home}/; name the folder after the recipe")

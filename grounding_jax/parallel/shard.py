"""Placing an NNX model's variables on a mesh by the logical names in their metadata.

Models annotate each parameter with one logical name per dimension, e.g.
`nnx.Param(w, out_sharding=("embed", "mlp"), eager_sharding=False)` (flax 0.12 stores the names under
the `out_sharding` metadata key; the older `sharding` / `sharding_names` keys are read too).
`eager_sharding=False` (or `with nnx.use_eager_sharding(False):`) keeps flax from trying to shard by
the raw logical names at construction; placement is done here, by rules.
"""

from collections.abc import Callable
from typing import Any, TypeVar

import jax
from flax import nnx
import numpy as np

from grounding_jax.parallel import rules as rules_lib

_SHARDING_KEYS = ("out_sharding", "sharding_names", "sharding")
M = TypeVar("M", bound=nnx.Module)


def logical_names(variable: nnx.Variable) -> tuple[str | None, ...] | None:
  """The logical dimension names stored on `variable`, or None when it has none."""
  metadata = variable.get_metadata()
  for key in _SHARDING_KEYS:
    names = metadata.get(key)
    if names:
      return tuple(names)
  return None


def _path_str(path: tuple[Any, ...]) -> str:
  return ".".join(str(p) for p in path)


def _variable_sharding(path, variable, mesh, rules, strict) -> jax.sharding.NamedSharding:
  value = variable.get_value()
  shape = tuple(value.shape) if hasattr(value, "shape") else np.shape(value)  # arrays or abstract
  names = logical_names(variable)
  if names is None:
    if strict and isinstance(variable, nnx.Param) and len(shape) > 0:
      raise ValueError(f"parameter {_path_str(path)} (shape {shape}) has no logical axis names; "
                       "create it with nnx.Param(..., out_sharding=(<one name per dim>))")
    return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
  if len(names) != len(shape):
    raise ValueError(f"parameter {_path_str(path)} has shape {shape} but logical names {names}; give "
                     "one name per dimension")
  try:
    return rules_lib.logical_sharding(names, shape, mesh, rules)
  except ValueError as e:
    raise ValueError(f"parameter {_path_str(path)}: {e}") from None


def _key_name(key: Any) -> Any:
  for attr in ("key", "idx", "name"):
    if hasattr(key, attr):
      return getattr(key, attr)
  return key


def _map_variables(state: nnx.State, fn: Callable[[tuple, nnx.Variable], Any]) -> nnx.State:
  return jax.tree.map_with_path(
      lambda kp, v: v.replace(fn(tuple(_key_name(k) for k in kp), v)),
      state, is_leaf=lambda x: isinstance(x, nnx.Variable))


def state_shardings(model_or_state: nnx.Module | nnx.State, mesh: jax.sharding.Mesh,
                    rules: rules_lib.Rules | None = None, *, strict: bool = True) -> nnx.State:
  """NamedShardings for every variable, as a State shaped like `nnx.state(model)`.

  Pass it as `jax.jit(..., in_shardings=..., out_shardings=...)` for the state half of
  `nnx.split(model)`. Variables without names (RNG counters, scalars) are replicated. Works on
  abstract states too (`nnx.eval_shape`), e.g. to restore a checkpoint straight onto the mesh.

  Args:
    model_or_state: an NNX module, or a State from `nnx.split` / `nnx.state` (optionally filtered).
    mesh: the device mesh.
    rules: logical -> mesh axis rules; default DEFAULT_RULES.
    strict: raise when an array-valued nnx.Param has no logical names (instead of replicating it).
  """
  state = model_or_state if isinstance(model_or_state, nnx.State) else nnx.state(model_or_state)
  return _map_variables(state, lambda p, v: _variable_sharding(p, v, mesh, rules, strict))


def _place_all(values: list[Any], shardings: list[jax.sharding.NamedSharding]) -> list[jax.Array]:
  """Puts each value on its sharding; works on one process and across several."""
  if jax.process_count() == 1:
    return jax.device_put(values, shardings)
  out: list[Any] = [None] * len(values)
  spread = [i for i, v in enumerate(values)
            if isinstance(v, jax.Array) and not v.is_fully_addressable]
  if spread:
    # Already spread over several processes (re-sharding to a new layout): one jitted identity lets
    # XLA move the shards between processes, compiled once for the whole model.
    moved = jax.jit(lambda xs: xs, out_shardings=[shardings[i] for i in spread])(
        [values[i] for i in spread])
    for i, array in zip(spread, moved):
      out[i] = array
  for i, value in enumerate(values):
    if out[i] is None:
      # Every process holds the full value; each fills the shards of its own devices.
      host = np.asarray(value)
      out[i] = jax.make_array_from_callback(host.shape, shardings[i], lambda index, h=host: h[index])
  return out


def shard_model(model: M, mesh: jax.sharding.Mesh, rules: rules_lib.Rules | None = None, *,
                strict: bool = True) -> M:
  """Moves every variable of `model` onto `mesh` by its logical names (in place); returns `model`.
  An abstract variable (a jax.ShapeDtypeStruct, e.g. of `nnx.eval_shape`) gets its sharding
  attached instead: the target a checkpoint restores onto.

  Args:
    model: an NNX module whose nnx.Params carry logical axis names (see module docstring).
    mesh: the device mesh, e.g. from `make_mesh`.
    rules: logical -> mesh axis rules; default DEFAULT_RULES.
    strict: raise when an array-valued nnx.Param has no logical names (instead of replicating it).

  Raises:
    ValueError: naming the parameter, when its names are missing (strict), of the wrong length, or
      have no rule.
  """
  state = nnx.state(model)
  shardings = state_shardings(state, mesh, rules, strict=strict)
  is_var = lambda x: isinstance(x, nnx.Variable)
  variables, treedef = jax.tree.flatten(state, is_leaf=is_var)
  targets = jax.tree.leaves(shardings, is_leaf=is_var)
  values, places = [v.get_value() for v in variables], [t.get_value() for t in targets]
  abstract = [isinstance(x, jax.ShapeDtypeStruct) for x in values]
  placed = iter(_place_all([x for x, a in zip(values, abstract) if not a],
                           [t for t, a in zip(places, abstract) if not a]))
  arrays = [jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=t) if a else next(placed)
            for x, t, a in zip(values, places, abstract)]
  nnx.update(model, jax.tree.unflatten(treedef, [v.replace(a) for v, a in zip(variables, arrays)]))
  return model

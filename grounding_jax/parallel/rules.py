"""Logical axis names -> mesh axes: the rules table, PartitionSpecs and activation constraints.

Every parameter and activation dimension has a logical name ("embed", "q_heads", "batch", ...).
Rules say which mesh axes each name is split over, MaxText style. Resolution is per array:

* a name maps to the mesh axes its rule lists, skipping axes the mesh does not have;
* a mesh axis already used by an earlier dimension of the same array is skipped (a PartitionSpec may
  use each mesh axis once);
* with a shape given, a mesh axis is skipped when the dimension is not divisible by the product of the
  axes kept so far times its size (e.g. SmolLM2's 9 query heads on tensor=2 stay replicated).

Activation constraints need to know the mesh. "Active" means: inside `use_mesh(mesh, rules)` of this
module (a contextvar, read when a function is traced; wrap the jitted call or its first trace in it).
Outside any `use_mesh`, `with_logical_constraint` returns its input unchanged, so model code runs
as-is on one device and in tests.
"""

from collections.abc import Iterator, Mapping, Sequence
import contextlib
import contextvars
import dataclasses
from typing import Any

import jax
from jax.sharding import NamedSharding, PartitionSpec

MeshAxes = str | tuple[str, ...] | None
Rules = Sequence[tuple[str, MeshAxes]]

DEFAULT_RULES: tuple[tuple[str, MeshAxes], ...] = (
    # The leading axis of a scanned model's stacked layer parameters (Transformer.scan_layers):
    # replicated, so every device holds its share of every layer and the scan's per-layer slice
    # needs no communication.
    ("layers", None),
    ("batch", ("data", "fsdp")),
    ("vocab", "tensor"),
    ("embed", "fsdp"),
    ("q_heads", "tensor"),
    ("kv_heads", "tensor"),
    ("mlp", "tensor"),
    ("head_dim", None),
    ("norm", None),
    ("length", None),
    # A LoRA adapter's rank dimension (models/lora.py): a few columns, replicated; the adapter's
    # other dimensions follow its weight's names.
    ("lora_rank", None),
)


def _normalize_rules(rules: Any) -> dict[str, tuple[str, ...]]:
  """Rules as pairs (tuple/list, e.g. from an ml_collections config) or a Mapping -> name -> axes."""
  pairs = rules.items() if hasattr(rules, "items") else rules
  table: dict[str, tuple[str, ...]] = {}
  for pair in pairs:
    try:
      name, axes = pair
    except (TypeError, ValueError):
      raise ValueError(f"a sharding rule must be a (logical_name, mesh_axes) pair, got {pair!r}") from None
    if axes is None:
      axes = ()
    elif isinstance(axes, str):
      axes = (axes,)
    else:
      axes = tuple(axes)
    if not all(isinstance(a, str) for a in axes):
      raise ValueError(f"rule for {name!r} must name mesh axes as strings, got {axes!r}")
    table.setdefault(name, axes)  # the first rule for a name wins, as in flax/MaxText
  return table


def _resolve(names: Sequence[str | None], rules: Any, shape: Sequence[int] | None,
             mesh_sizes: Mapping[str, int] | None) -> PartitionSpec:
  table = _normalize_rules(DEFAULT_RULES if rules is None else rules)
  if shape is not None and len(shape) != len(names):
    raise ValueError(f"logical names {tuple(names)} have {len(names)} entries but the array has shape "
                     f"{tuple(shape)}; give one name (or None) per dimension")
  used: set[str] = set()
  spec = []
  for dim, name in enumerate(names):
    if name is None:
      spec.append(None)
      continue
    if name not in table:
      raise ValueError(f"logical axis {name!r} has no sharding rule (rules cover {sorted(table)}); add "
                       f"({name!r}, None) to the rules to replicate it")
    kept: list[str] = []
    split = 1
    for axis in table[name]:
      if axis in used or (mesh_sizes is not None and axis not in mesh_sizes):
        continue
      size = 1 if mesh_sizes is None else mesh_sizes[axis]
      if shape is not None and shape[dim] % (split * size):
        continue
      kept.append(axis)
      split *= size
    used.update(kept)
    spec.append(None if not kept else kept[0] if len(kept) == 1 else tuple(kept))
  return PartitionSpec(*spec)


def logical_to_spec(names: Sequence[str | None], rules: Rules | None = None) -> PartitionSpec:
  """Maps logical dimension names to a PartitionSpec (no mesh or shape: no divisibility fallback).

  Args:
    names: one logical name (or None = replicated) per array dimension.
    rules: (logical_name, mesh_axes) pairs; default DEFAULT_RULES.

  Raises:
    ValueError: for a name with no rule.
  """
  return _resolve(names, rules, None, None)


def logical_sharding(names: Sequence[str | None], shape: Sequence[int], mesh: jax.sharding.Mesh,
                     rules: Rules | None = None) -> NamedSharding:
  """The NamedSharding of an array of `shape` whose dimensions have logical `names` on `mesh`.

  Mesh axes the mesh lacks, that an earlier dimension already uses, or that do not divide the
  dimension are dropped, so the result is always valid (worst case: replicated).
  """
  return NamedSharding(mesh, _resolve(names, rules, tuple(shape), dict(mesh.shape)))


@dataclasses.dataclass(frozen=True)
class _Context:
  mesh: jax.sharding.Mesh
  rules: Any


_ACTIVE: contextvars.ContextVar[_Context | None] = contextvars.ContextVar("grounding_jax_mesh",
                                                                          default=None)


@contextlib.contextmanager
def use_mesh(mesh: jax.sharding.Mesh, rules: Rules | None = None) -> Iterator[jax.sharding.Mesh]:
  """Makes `mesh` (and `rules`, default DEFAULT_RULES) active for `with_logical_constraint`.

  The activation is read at trace time: enter it around the call that first traces a jitted function.
  """
  token = _ACTIVE.set(_Context(mesh, DEFAULT_RULES if rules is None else rules))
  try:
    yield mesh
  finally:
    _ACTIVE.reset(token)


def active_mesh() -> jax.sharding.Mesh | None:
  """The mesh of the innermost `use_mesh`, or None."""
  ctx = _ACTIVE.get()
  return None if ctx is None else ctx.mesh


def with_logical_constraint(x: jax.Array, names: Sequence[str | None],
                            rules: Rules | None = None) -> jax.Array:
  """Constrains `x`'s layout by logical dimension names; returns `x` unchanged without an active mesh.

  Args:
    x: any array, e.g. activations [batch, length, embed].
    names: one logical name (or None) per dimension of `x`.
    rules: overrides the rules given to `use_mesh`.
  """
  ctx = _ACTIVE.get()
  if ctx is None:
    return x
  sharding = logical_sharding(names, x.shape, ctx.mesh, ctx.rules if rules is None else rules)
  return jax.lax.with_sharding_constraint(x, sharding)

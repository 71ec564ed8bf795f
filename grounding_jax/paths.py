"""Local and bucket paths (gs://, s3://, …) behind one API, etils.epath (what orbax itself uses).

Local paths become absolute (orbax wants that); bucket paths stay URIs. Which backend serves a
bucket is epath's choice: tf.io.gfile when TensorFlow is installed, else fsspec (gcsfs for gs://,
the `gcs` extra in setup.py). Bucket objects cannot be appended to, so writers that append locally
rewrite whole objects there (see metrics_writer).
"""

from __future__ import annotations

import os

from etils import epath

# URI schemes that name object stores rather than local files (epath's list).
_BUCKET_PREFIXES = ("gs://", "s3://", "az://", "hf://")


def is_local(path: str | os.PathLike) -> bool:
  """Whether `path` is on a local (or mounted) file system rather than a bucket URI."""
  return not os.fspath(path).startswith(_BUCKET_PREFIXES)


def as_path(path: str | os.PathLike) -> epath.Path:
  """An epath.Path for `path`: absolute when local, the URI as given when on a bucket."""
  if is_local(path):
    return epath.Path(os.path.abspath(os.fspath(path)))
  return epath.Path(os.fspath(path))


def scheme(path: str | os.PathLike) -> str:
  """'gs', 's3', … for a bucket URI; '' for a local path."""
  text = os.fspath(path)
  return "" if is_local(text) else text.split("://", 1)[0]

"""Local paths become absolute epath paths; bucket URIs stay URIs (gs:// is not reachable from the
test machine, so only the classification is tested for them)."""

import os

from etils import epath

from grounding_jax import paths


def test_local_and_bucket_paths(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  local = paths.as_path("runs/a")
  assert isinstance(local, epath.Path) and os.fspath(local) == str(tmp_path / "runs" / "a")
  assert paths.is_local("runs/a") and paths.scheme("runs/a") == ""
  for uri, scheme in [("gs://bucket/runs/a", "gs"), ("s3://b/x", "s3")]:
    assert not paths.is_local(uri) and paths.scheme(uri) == scheme
    assert os.fspath(paths.as_path(uri)) == uri
    assert os.fspath(paths.as_path(uri) / "checkpoints") == uri + "/checkpoints"

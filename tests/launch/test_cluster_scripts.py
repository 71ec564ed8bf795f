"""The pod and cluster launchers' --dry_run output: the exact commands for given arguments, and
remote / batch shell text that a shell parses into the intended program and flags."""

import pathlib
import shlex
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
_ENTRY_ARGS = ["--config=configs/grace.py", "--config.stages[0].data.path=gs://b/data/train.jsonl"]


def _dry_run(script, *args):
  proc = subprocess.run([sys.executable, str(ROOT / "launch" / script), *args, "--dry_run", "--",
                         *_ENTRY_ARGS], capture_output=True, text=True, timeout=60, cwd=ROOT)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc.stdout


def _bash_syntax_ok(text):
  return subprocess.run(["bash", "-n", "-c", text], capture_output=True).returncode == 0


def _words(text):
  """Shell tokens of `text`, operators (; | & > >&) as their own tokens, quotes removed."""
  lex = shlex.shlex(text, posix=True, punctuation_chars=True)
  lex.whitespace_split = True
  return list(lex)


def _commands(text, python="python3"):
  """[(argv of each `python3 …` command, the operator tokens after it up to the next word run)]."""
  words, out = _words(text), []
  for i, w in enumerate(words):
    if w == python:
      end = next((j for j in range(i, len(words)) if set(words[j]) <= set(";|&<>")), len(words))
      if end < len(words) and words[end - 1].isdigit() and words[end][0] in "<>":
        end -= 1  # "2>&1": the descriptor belongs to the redirection
      tail_end = next((j for j in range(end, len(words)) if words[j] in (";", "fi", "then", "else")),
                      len(words))
      out.append((words[i:end], words[end:tail_end]))
  return out


def test_tpu_dry_run_renders_install_and_run():
  out = _dry_run("tpu/run.py", "--tpu=my-v5e-16", "--zone=us-west4-a", "--project=proj",
                 "--workdir=gs://b/runs/grace", "--setup=gcloud storage cp -r gs://b/m /tmp/",
                 "--env=LIBTPU_INIT_ARGS=--xla_tpu_a=true --xla_tpu_b=1")
  archive, scp, install, run = [shlex.split(line) for line in out.strip().splitlines()]
  assert archive == ["git", "-C", str(ROOT), "archive", "--format=tar.gz",
                     "--output=/tmp/grounding_jax.tar.gz", "HEAD"]
  where = ["--zone=us-west4-a", "--worker=all", "--project=proj"]
  assert scp == ["gcloud", "compute", "tpus", "tpu-vm", "scp", "/tmp/grounding_jax.tar.gz",
                 "my-v5e-16:~/grounding_jax.tar.gz", *where]
  for cmd in (install, run):
    assert cmd[:6] == ["gcloud", "compute", "tpus", "tpu-vm", "ssh", "my-v5e-16"]
    assert cmd[7:] == where and cmd[6].startswith("--command=")
    assert _bash_syntax_ok(cmd[6][len("--command="):])
  install_steps = install[6][len("--command="):].split(" && ")
  assert install_steps[2:] == [
      "tar xzf ~/grounding_jax.tar.gz -C ~/grounding_jax",
      "python3 -m pip install -q -U 'jax[tpu]' -e ~/'grounding_jax[gcs]'",
      "gcloud storage cp -r gs://b/m /tmp/"]
  remote = run[6][len("--command="):]
  assert "LIBTPU_INIT_ARGS=--xla_tpu_a=true --xla_tpu_b=1" in _words(remote)
  program = ["python3", "launch/train.py", *_ENTRY_ARGS, "--workdir=gs://b/runs/grace"]
  # worker 0 → terminal and its log; every other worker → its log only
  assert 'if [ "$WORKER" = 0 ]; then' in remote and "agent-worker-number" in remote
  assert _commands(remote) == [
      (program, ["2", ">&", "1", "|", "tee", "~/grounding_jax_logs/grace.log"]),
      (program, [">", "~/grounding_jax_logs/grace.log", "2", ">&", "1"])]


def test_tpu_dry_run_without_install_in_background():
  out = _dry_run("tpu/run.py", "--tpu=t", "--zone=z", "--noinstall", "--background",
                 "--entry=launch/evaluate.py", "--name=ev")
  run, follow = out.strip().splitlines()
  remote = shlex.split(run)[6][len("--command="):]
  assert _bash_syntax_ok(remote)
  [(program, tail)] = _commands(remote)
  assert program == ["python3", "launch/evaluate.py", *_ENTRY_ARGS]
  assert tail[:7] == [">", "~/grounding_jax_logs/ev.log", "2", ">&", "1", "<", "/dev/null"]
  assert "nohup python3 launch/evaluate.py" in remote and tail[7] == "&"
  assert shlex.split(follow.removeprefix("# follow worker 0: ")) == [
      "gcloud", "compute", "tpus", "tpu-vm", "ssh", "t", "--command=tail -f ~/grounding_jax_logs/ev.log",
      "--zone=z", "--worker=0"]


def test_sbatch_per_gpu_and_per_node():
  for procs, tasks in (("gpu", 8), ("node", 1)):
    script = _dry_run("slurm/sbatch.py", "--nodes=2", "--gpus_per_node=8", f"--procs={procs}",
                      "--partition=gpu", "--time=2:00:00", "--setup=source .venv/bin/activate",
                      "--env=NCCL_DEBUG=WARN", "--workdir=/shared/runs/grace")
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash" and _bash_syntax_ok(script)
    directives = [l for l in lines if l.startswith("#SBATCH")]
    assert directives == ["#SBATCH --job-name=grounding_jax", "#SBATCH --nodes=2",
                          f"#SBATCH --ntasks-per-node={tasks}", "#SBATCH --gpus-per-node=8",
                          "#SBATCH --output=slurm-%x-%j.out", "#SBATCH --partition=gpu",
                          "#SBATCH --time=2:00:00"]
    assert "--gpus-per-task" not in script  # binds one GPU per task: breaks jax's SLURM layout
    body = lines[len(directives) + 1:]
    assert body[:4] == ["set -euo pipefail", f"cd {ROOT}", "source .venv/bin/activate",
                        "export NCCL_DEBUG=WARN"]
    assert body[-2] == "mkdir -p slurm_logs/$SLURM_JOB_ID"
    srun = shlex.split(body[-1])
    assert srun[:4] == ["srun", "--kill-on-bad-exit=1", "bash", "-c"] and len(srun) == 5
    per_task = srun[4]  # each task's shell: rank 0 → the job's output file, others → their own log
    assert per_task.startswith('if [ "$SLURM_PROCID" = 0 ]; then exec python3 ')
    program = ["python3", "launch/train.py", *_ENTRY_ARGS, "--workdir=/shared/runs/grace"]
    assert _commands(per_task) == [
        (program, []),
        (program, [">", "slurm_logs/$SLURM_JOB_ID/process-$SLURM_PROCID.log", "2", ">&", "1"])]


def test_local_gpus_one_process_and_one_per_gpu():
  one = _dry_run("slurm/local_gpus.py", "--gpus=4", "--python=python3").splitlines()
  assert one == [f"cd {ROOT}", "CUDA_VISIBLE_DEVICES=0,1,2,3 python3 launch/train.py "
                 + shlex.join(_ENTRY_ARGS)]
  lines = _dry_run("slurm/local_gpus.py", "--gpus=4", "--procs=gpu", "--python=python3",
                   "--port=9999", "--workdir=/runs/x").splitlines()
  assert lines[:2] == [f"cd {ROOT}", "mkdir -p local_logs"] and _bash_syntax_ok("\n".join(lines))
  program = ["python3", "launch/train.py", *_ENTRY_ARGS, "--workdir=/runs/x"]
  by_rank = {}
  for line in lines[2:]:
    words = _words(line)
    env = dict(w.split("=", 1) for w in words[:4])
    [(argv, tail)] = _commands(line)
    assert argv == program
    by_rank[int(env["JAX_PROCESS_ID"])] = (env, tail)
  assert sorted(by_rank) == [0, 1, 2, 3]
  for rank, (env, tail) in by_rank.items():
    assert env == {"CUDA_VISIBLE_DEVICES": str(rank), "JAX_COORDINATOR_ADDRESS": "localhost:9999",
                   "JAX_NUM_PROCESSES": "4", "JAX_PROCESS_ID": str(rank)}
    assert tail == ([] if rank == 0 else [">", f"local_logs/process-{rank}.log", "2", ">&", "1", "&"])
  assert lines[-1].startswith("CUDA_VISIBLE_DEVICES=0 ")  # process 0 last, in the foreground


def _fake(path, text):
  path.write_text("#!/bin/bash\n" + text)
  path.chmod(0o755)
  return path


def test_sbatch_requeue_signals_the_tasks_and_requeues_when_one_exits_75(tmp_path):
  """The --requeue script, run by bash with stand-ins for srun (two tasks), scontrol and python:
  process 0 exits 75 (preempted) while process 1 is killed (srun's --kill-on-bad-exit), so srun's
  status is not 75, and the job is requeued all the same; a run that finishes is not."""
  bin_dir = tmp_path / "bin"
  bin_dir.mkdir()
  _fake(bin_dir / "srun", 'shift; SLURM_PROCID=0 "$@" & a=$!; SLURM_PROCID=1 "$@" & b=$!\n'
        'wait $a; ra=$?; wait $b; rb=$?; exit $(( ra > rb ? ra : rb ))\n')
  _fake(bin_dir / "scontrol", f'echo "$@" >> {tmp_path}/scontrol.log\n')
  python = _fake(tmp_path / "python", 'if [ "$SLURM_PROCID" = 0 ]; then exit $STATUS0; fi; exit 137\n')
  script = _dry_run("slurm/sbatch.py", "--nodes=1", "--gpus_per_node=2", "--requeue",
                    "--signal_seconds=600", f"--python={python}", f"--repo_dir={tmp_path}",
                    "--process_logs=logs", "--workdir=/shared/runs/grace")
  assert _bash_syntax_ok(script)
  directives = [l for l in script.splitlines() if l.startswith("#SBATCH")]
  assert directives[-3:] == ["#SBATCH --requeue", "#SBATCH --signal=TERM@600",
                             "#SBATCH --open-mode=append"]
  for status, requeued in ((75, True), (0, False), (75, True)):  # the marker is not left over
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURM_JOB_ID": "123", "STATUS0": str(status)}
    (tmp_path / "scontrol.log").unlink(missing_ok=True)
    proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 137, proc.stderr  # srun's status, passed on
    log = tmp_path / "scontrol.log"
    assert (log.read_text() == "requeue 123\n") if requeued else not log.exists(), proc.stdout
    assert ("requeueing job 123" in proc.stdout) == requeued

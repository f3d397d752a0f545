"""msa_oracle.distributed on a local Ray cluster of 2 CPUs: the smoke suite generated in 2 shards equals the unsharded
run byte for byte; a worker killed once is retried and the result is still identical; a rerun keeps every finished
case; a recall sweep in 3 shards equals the unsharded sweep; mo.golden's shards and merge, and its refusals."""
import json
import os
import subprocess
import sys

import pytest

ray = pytest.importorskip("ray")
import msa_oracle as mo  # noqa: E402
from msa_oracle import distributed  # noqa: E402

TASK_OPTIONS = dict(num_cpus=1, max_retries=3, retry_exceptions=False)


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def unsharded(tmp_path_factory):
    """The smoke suite as one run of the msa tool writes it."""
    directory = tmp_path_factory.mktemp("whole")
    subprocess.run([mo.judge.msa_tool(), "golden", "generate", "--suite", "smoke", "--dir", str(directory)],
                   check=True, capture_output=True)
    return directory


def same_suite(directory, whole):
    """MANIFEST.json and every file it lists, byte for byte."""
    manifest = (whole / "MANIFEST.json").read_bytes()
    assert (directory / "MANIFEST.json").read_bytes() == manifest
    for entry in json.loads(manifest)["cases"]:
        for file_name in entry["files"]:
            assert (directory / entry["name"] / file_name).read_bytes() == \
                (whole / entry["name"] / file_name).read_bytes(), (entry["name"], file_name)


def test_two_ray_shards_equal_the_unsharded_run(cluster, unsharded, tmp_path):
    summary, shards = distributed.run_golden("smoke", tmp_path, 2, TASK_OPTIONS, use_gpu=False)
    assert "17 cases from 2 shards" in summary
    assert [s["shard"] for s in shards] == ["0/2", "1/2"] and not any(s["kept"] for s in shards)
    same_suite(tmp_path, unsharded)


def test_a_killed_worker_is_retried_and_loses_no_case(cluster, unsharded, tmp_path):
    marker = tmp_path / "killed"
    out = tmp_path / "suite"
    _, shards = distributed.run_golden("smoke", out, 2, TASK_OPTIONS, use_gpu=False, kill_once_marker=str(marker))
    assert marker.exists()  # a worker did die after its first case
    same_suite(out, unsharded)
    # The retried task kept the case the dead worker had finished (the first of its shard) instead of redoing it.
    retried = [s for s in shards if s["kept"]]
    assert len(retried) == 1, shards
    index = int(retried[0]["shard"].split("/")[0])
    assert retried[0]["kept"] == [mo.golden.case_names("smoke")[index]]


def test_a_rerun_keeps_every_finished_case(cluster, unsharded, tmp_path):
    distributed.run_golden("smoke", tmp_path, 2, TASK_OPTIONS, use_gpu=False)
    stamps = {p: p.stat().st_mtime_ns for p in tmp_path.glob("*/*.safetensors")}
    lines = []

    class Lines:
        def write(self, text):
            lines.append(text)

        def flush(self):
            pass

        def isatty(self):
            return False

    distributed.run_golden("smoke", tmp_path, 2, TASK_OPTIONS, use_gpu=False, stream=Lines())
    assert {p: p.stat().st_mtime_ns for p in tmp_path.glob("*/*.safetensors")} == stamps  # nothing rewritten
    assert "cases 17/17 (17 kept from an earlier run)" in "".join(lines)
    same_suite(tmp_path, unsharded)


RECALL_FLAGS = ["--context", "256,320", "--distance", "32,96", "--strength", "1,4", "--block-size", "16", "--top-k",
                "4", "--pooling", "max,lse", "--queries", "2", "--sequences", "2", "--head-dim", "8"]


def test_recall_in_three_ray_shards_equals_the_unsharded_sweep(cluster, tmp_path):
    subprocess.run([mo.judge.msa_tool(), "recall", *RECALL_FLAGS, "--out-dir", str(tmp_path / "whole")], check=True,
                   capture_output=True)
    code, output = distributed.run_recall(tmp_path / "ray", RECALL_FLAGS, 3, TASK_OPTIONS, use_gpu=False)
    assert code == 0, output
    for file_name in ("recall.csv", "recall.json"):
        assert (tmp_path / "ray" / file_name).read_bytes() == (tmp_path / "whole" / file_name).read_bytes()
    assert sorted(p.name for p in (tmp_path / "ray").iterdir()) == ["recall.csv", "recall.json"]


def test_the_module_runs_as_a_command(unsharded, tmp_path):
    """python -m msa_oracle.distributed, with its own local cluster (started after the fixture's is shut down)."""
    if ray.is_initialized():
        ray.shutdown()
    run = subprocess.run([sys.executable, "-m", "msa_oracle.distributed", "golden", "--suite", "smoke", "--dir",
                          str(tmp_path), "--num-cpus", "2"], capture_output=True, text=True, env=os.environ.copy())
    assert run.returncode == 0, run.stderr
    assert "17 cases from 2 shards" in run.stdout
    assert "cases 17/17" in run.stderr
    same_suite(tmp_path, unsharded)


def test_golden_shards_and_merge_from_python(unsharded, tmp_path):
    for index in range(3):
        mo.golden.generate(tmp_path / f"s{index}", "smoke", shard=f"{index}/3", backend="reference")
    print(mo.golden.merge(tmp_path / "merged", [tmp_path / f"s{i}" for i in (2, 0, 1)]))
    same_suite(tmp_path / "merged", unsharded)
    with pytest.raises(mo.golden.GoldenError, match="shard 1/3 is missing"):
        mo.golden.merge(tmp_path / "bad", [tmp_path / "s0", tmp_path / "s2"])
    with pytest.raises(mo.golden.GoldenError, match="appears twice"):
        mo.golden.merge(tmp_path / "bad", [tmp_path / "s0", tmp_path / "s1", tmp_path / "s1", tmp_path / "s2"])
    with pytest.raises(ValueError, match="shard='3': must be"):
        mo.golden.generate(tmp_path / "x", "smoke", shard="3")
    with pytest.raises(ValueError, match="I must be in"):
        mo.golden.generate(tmp_path / "x", "smoke", shard=(3, 3))

"""Golden suites and recall sweeps spread over a Ray cluster: one Ray task per static shard, merged into the files
one unsharded run writes, byte for byte.

    python -m msa_oracle.distributed golden --suite full --dir goldens [--shards N] [--num-cpus N] [--address A]
    python -m msa_oracle.distributed recall --out-dir study [--shards N] [--address A] -- <msa recall flags>

Each task runs one shard (`msa golden generate --shard I/N` through the package; `msa recall --shard I/N` through
the package's msa tool) with one GPU where the cluster has GPUs (the gpu backend, exact), else one CPU (the fastest
CPU exact backend). Every backend's exact mode gives the reference's bits, and the files record "reference", so the
merged files do not depend on which worker ran what. Ray retries a task whose worker died; a golden shard resumes
from its record, so the cases it finished are kept (their SHA-256 checked), and a rerun of the whole command keeps
every finished case. Cases are written into temporary directories renamed into place: an interrupted run leaves no
half-written case. Every worker must see the output directory (one machine, or a shared file system).

Progress: every task reports each finished case to a Ray actor; the driver prints cases done / total, the rate and
the ETA (in place on a terminal, a line per change otherwise)."""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import time

try:
    import ray
except ImportError as error:  # an optional dependency: say how to get it
    raise ImportError("msa_oracle.distributed needs Ray: pip install 'msa-oracle[distributed]' (or ray>=2.60)") \
        from error

from . import _core, golden, judge


@ray.remote(num_cpus=0)
class Progress:
    """The cases finished so far, by name, as the tasks report them (a retried task's repeats count once)."""

    def __init__(self):
        self.reused = {}  # case name -> kept from an earlier run rather than computed

    def case_done(self, name, reused):
        self.reused.setdefault(name, reused)

    def counts(self):
        return len(self.reused), sum(self.reused.values())


def _exact_backend(use_gpu):
    """The gpu backend on a GPU task; else the fastest CPU backend here (simd, else the reference)."""
    available = {name for name, ok in _core.backends() if ok}
    for name in (["gpu"] if use_gpu else []) + ["simd"]:
        if name in available:
            return name
    return "reference"


def _created(path):
    """Creates the file at path and says whether this call did: of tasks racing for it, exactly one wins (O_EXCL;
    a test of os.path.exists before creating lets two tasks that finish together both win)."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def _golden_shard(suite, directory, index, count, use_gpu, progress, kill_once_marker):
    """One shard of a golden suite, resuming from its record (a retried task keeps what the dead one finished). Every
    report has reached the Progress actor before the shard returns, so the driver's last count includes them all."""

    kept, reports = [], []

    def report(position, total, name, seconds, reused):
        reports.append(progress.case_done.remote(name, reused))
        if reused:
            kept.append(name)
        if kill_once_marker and not reused and _created(kill_once_marker):  # the tests' fault
            os.kill(os.getpid(), signal.SIGKILL)

    backend = _exact_backend(use_gpu)
    _core.generate_golden(directory, suite, None, report, shard_index=index, shard_count=count, backend=backend,
                          resume=True)
    ray.get(reports)
    return dict(shard=f"{index}/{count}", backend=backend, kept=kept)


def _recall_shard(out_dir, index, count, recall_args, use_gpu):
    """One shard of a recall sweep, by the package's msa tool, into out_dir/shard-I-of-N."""
    shard_dir = os.path.join(out_dir, f"shard-{index}-of-{count}")
    run = subprocess.run([judge.msa_tool(), "recall", *recall_args, "--shard", f"{index}/{count}", "--out-dir",
                          shard_dir], capture_output=True, text=True)
    if run.returncode not in (0, 1):  # 1: a backend falls short, a result the merge reports
        raise RuntimeError(f"msa recall --shard {index}/{count} failed ({run.returncode}): {run.stderr.strip()}")
    return shard_dir


def _cluster(args):
    """Starts or joins the cluster; returns (shards, use_gpu, task options)."""
    if args.address:
        ray.init(address=args.address, log_to_driver=False)
    else:
        ray.init(num_cpus=args.num_cpus, log_to_driver=False, include_dashboard=False)
    resources = ray.cluster_resources()
    gpus, cpus = int(resources.get("GPU", 0)), int(resources.get("CPU", 1))
    use_gpu = gpus > 0
    shards = args.shards or (gpus if use_gpu else max(1, cpus))
    options = dict(num_gpus=1, num_cpus=1) if use_gpu else dict(num_cpus=1)
    return shards, use_gpu, dict(options, max_retries=args.retries, retry_exceptions=False)


class _ProgressLine:
    """cases done / total, rate, ETA: in place on a terminal, a line per change otherwise."""

    def __init__(self, total, stream=sys.stderr):
        self.total, self.stream, self.start, self.last = total, stream, time.monotonic(), None
        self.tty = stream.isatty()

    def show(self, done, reused):
        if (done, reused) == self.last:
            return
        self.last = (done, reused)
        elapsed = time.monotonic() - self.start
        computed = done - reused
        rate = computed / elapsed if elapsed > 0 and computed > 0 else 0.0
        eta = f"ETA {(self.total - done) / rate:.0f} s" if rate > 0 else "ETA unknown"
        line = f"cases {done}/{self.total} ({reused} kept from an earlier run), {rate:.2f} cases/s, {eta}"
        self.stream.write(("\r" + line + "   ") if self.tty else line + "\n")
        self.stream.flush()

    def finish(self):
        if self.tty:
            self.stream.write("\n")


def run_golden(suite, directory, shards, task_options, use_gpu, kill_once_marker=None, stream=sys.stderr):
    """Generates `suite` into `directory` as `shards` Ray tasks, then merges them (MANIFEST.json). Returns the merge
    summary and, per shard, {shard, backend, kept: the cases kept from an earlier run}. kill_once_marker: a path that
    does not exist yet; the first task to finish a case creates it (exactly one task does) and kills its own worker,
    what the tests use to check that a retried task loses no case."""
    directory = os.path.abspath(os.fspath(directory))
    os.makedirs(directory, exist_ok=True)
    total = len(golden.case_names(suite))
    progress = Progress.remote()
    task = ray.remote(_golden_shard).options(**task_options)
    pending = [task.remote(suite, directory, i, shards, use_gpu, progress, kill_once_marker) for i in range(shards)]
    line = _ProgressLine(total, stream)
    results = []
    while pending:
        finished, pending = ray.wait(pending, timeout=1.0)
        results += ray.get(finished)
        line.show(*ray.get(progress.counts.remote()))
    line.finish()
    return golden.merge(directory, [directory]), sorted(results, key=lambda r: r["shard"])


def run_recall(out_dir, recall_args, shards, task_options, use_gpu, stream=sys.stderr):
    """Runs `msa recall <recall_args>` as `shards` Ray tasks and merges their files into out_dir; returns msa recall
    merge's exit status and output."""
    out_dir = os.path.abspath(os.fspath(out_dir))
    os.makedirs(out_dir, exist_ok=True)
    task = ray.remote(_recall_shard).options(**task_options)
    pending = [task.remote(out_dir, i, shards, list(recall_args), use_gpu) for i in range(shards)]
    done = []
    while pending:
        finished, pending = ray.wait(pending, timeout=1.0)
        done += ray.get(finished)
        if finished:
            stream.write(f"recall shards {len(done)}/{shards} done\n")
            stream.flush()
    merge = subprocess.run([judge.msa_tool(), "recall", "merge", "--out-dir", out_dir, *sorted(done)],
                           capture_output=True, text=True)
    if merge.returncode == 2:
        raise RuntimeError(f"msa recall merge failed: {merge.stderr.strip()}")
    for shard_dir in done:
        shutil.rmtree(shard_dir, ignore_errors=True)
    return merge.returncode, merge.stdout


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m msa_oracle.distributed", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    golden_parser = commands.add_parser("golden", help="generate a golden suite, one Ray task per shard")
    golden_parser.add_argument("--suite", default="smoke", choices=list(_core.golden_suites))
    golden_parser.add_argument("--dir", required=True, help="the suite's directory (seen by every worker)")
    recall_parser = commands.add_parser("recall", help="run msa recall, one Ray task per shard of its setups")
    recall_parser.add_argument("--out-dir", required=True, help="where recall.csv and recall.json go")
    recall_parser.add_argument("recall_args", nargs=argparse.REMAINDER,
                               help="msa recall's flags (after --), except --shard and --out-dir")
    for sub in (golden_parser, recall_parser):
        sub.add_argument("--shards", type=int, default=0,
                         help="number of shards (default: the cluster's GPUs, else its CPUs)")
        sub.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local cluster Ray starts")
        sub.add_argument("--address", default=None, help="an existing Ray cluster's address (ray://... or auto)")
        sub.add_argument("--retries", type=int, default=3, help="times Ray reruns a task whose worker died")
    args = parser.parse_args(argv)
    if args.shards < 0:
        parser.error(f"--shards {args.shards}: must be at least 1")
    shards, use_gpu, options = _cluster(args)
    start = time.monotonic()
    try:
        if args.command == "golden":
            summary, _ = run_golden(args.suite, args.dir, shards, options, use_gpu)
            print(f"msa_oracle.distributed golden: {summary} in {time.monotonic() - start:.1f} s")
            print(f"wrote {os.path.join(args.dir, golden.MANIFEST)}")
            return 0
        recall_args = [a for a in args.recall_args if a != "--"]
        code, output = run_recall(args.out_dir, recall_args, shards, options, use_gpu)
        print(output, end="")
        print(f"msa_oracle.distributed recall: {shards} shards in {time.monotonic() - start:.1f} s")
        return code
    except (golden.GoldenError, RuntimeError, ValueError, OSError) as error:
        print(f"msa_oracle.distributed: error: {error}", file=sys.stderr)
        return 2
    finally:
        ray.shutdown()


if __name__ == "__main__":
    sys.exit(main())

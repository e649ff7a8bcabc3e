"""Regression gate: the working tree against a base ref on a fast subset of the asv suite.

    make bench-compare [BASE=main] [FACTOR=1.75] [ROUNDS=4]

(see docs/benchmarking.md). Both sides run in the same Python (.venv, asv's "existing"
environment, so no virtualenv is built and nothing is downloaded):

* base: ``git archive BASE`` extracted to asv_bench/.asv/base-<sha> and put first on the path
  through ``ASV_PYTHONPATH`` (it shadows the editable install; Numba keys its cache by file path
  and content, so the cache for that folder stays valid between gate runs on the same base);
* head: the working tree's tape/ and jit/, committed or not, copied to asv_bench/.asv/head at
  the start (later edits do not leak into the run) and put on the path the same way.

Numba is warmed for both trees before anything is timed. Then ROUNDS rounds, each one asv round
per side with ``--append-samples``, in ABBA order (base-head, head-base, ...): the machine's slow
and fast streaks hit both sides alike, which one run per side cannot guarantee, and neither side
always runs first (a fixed order showed a bias in the noise study). Results go to
asv_bench/results-compare/{base,head} (one folder per side: the two carry the same commit hash
when BASE is HEAD). asv's own comparison (``asv compare``'s code: median per benchmark; a change
counts if it exceeds FACTOR and the confidence intervals separate) prints the table and decides:
exit status 1 when any benchmark of the subset got slower by more than FACTOR (or started
failing), else 0. ``--json`` writes the per-benchmark ratios head/base (the noise study's data).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import io

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
STATE = os.path.join(HERE, ".asv")

# The fast subset: tapejit's own code paths (the NumPy/hand-written/PyTorch columns do not change
# with tapejit) whose same-commit noise stayed well below FACTOR in the noise study: the W1-W5
# gradients and recording 1000 array ops. Left out (history only): the sub-2-ms kernels
# (Record.time_scalar_*, ReverseSweep.*), whose same-commit ratio reached 1.6-1.9x on the
# bimodal VM (docs/benchmarking.md); W1 covers scalar recording and the reverse sweep.
SUBSET = (r"bench_workloads\..*\.time_tapejit_grad"
          r"|bench_kernels\.Record\.time_array_unary_1000elem_x1000$")


def git(*args):
    return subprocess.run(["git", "-C", ROOT, *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def extract_base(sha):
    """The base tree, read-only from git (no checkout, no worktree): .asv/base-<sha12>."""
    dest = os.path.join(STATE, f"base-{sha[:12]}")
    if not os.path.isdir(os.path.join(dest, "tape")):
        tmp = dest + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        data = subprocess.run(["git", "-C", ROOT, "archive", sha, "tape", "jit"], check=True,
                              capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(tmp)
        os.rename(tmp, dest)
    return dest


def snapshot_head():
    """The working tree's tape/ and jit/, copied to .asv/head: edits made while the gate runs
    do not leak into later rounds, and both sides import from a plain folder alike."""
    dest = os.path.join(STATE, "head")
    shutil.rmtree(dest, ignore_errors=True)
    for pkg in ("tape", "jit"):
        shutil.copytree(os.path.join(ROOT, pkg), os.path.join(dest, pkg),
                        ignore=shutil.ignore_patterns("__pycache__", "*.py[cod]"))
    return dest


def side_env(pythonpath):
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.pop("ASV_PYTHONPATH", None)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"
    if pythonpath:
        env["PYTHONPATH"] = pythonpath          # for the warmup
        env["ASV_PYTHONPATH"] = pythonpath      # asv drops PYTHONPATH, passes this one on
    return env


def write_conf(side):
    """asv.conf.json with results_dir results-compare/<side>, written to .asv/ with absolute
    paths (asv resolves a config's relative paths against the config file's folder)."""
    from asv import util

    conf = util.load_json(os.path.join(HERE, "asv.conf.json"), js_comments=True)
    for key in ("repo", "benchmark_dir", "env_dir", "html_dir"):
        conf[key] = os.path.normpath(os.path.join(HERE, conf[key]))
    conf["results_dir"] = os.path.join(HERE, "results-compare", side)
    path = os.path.join(STATE, f"compare-{side}.conf.json")
    with open(path, "w") as f:
        json.dump(conf, f, indent=2)
    return path


def asv(conf_path, env, *args):
    cmd = [sys.executable, "-m", "asv", "--config", conf_path, *args]
    print("$", " ".join(cmd[1:]), flush=True)
    return subprocess.run(cmd, cwd=HERE, env=env).returncode


def resultset(results_dir, machine, sha):
    from asv.results import iter_results_for_machine_and_hash

    for result in iter_results_for_machine_and_hash(results_dir, machine, sha):
        for key in result.get_all_result_keys():
            params = result.get_result_params(key)
            yield (key, params, result.get_result_value(key, params),
                   result.get_result_stats(key, params), result.get_result_samples(key, params),
                   result.benchmark_version.get(key), result.params["machine"], result.env_name)


def ratios(base_rows, head_rows):
    """{benchmark: {median, min ratios head/base, sample counts}} from the raw samples."""
    from asv.commands.compare import unroll_result

    def flat(rows):
        out = {}
        for key, params, value, _stats, samples, *_ in rows:
            for name, v, s in unroll_result(key, params, value, samples):
                if v is not None and v == v and s:
                    out[name] = s
        return out

    b, h = flat(base_rows), flat(head_rows)
    out = {}
    for name in sorted(set(b) & set(h)):
        out[name] = {
            "median_ratio": statistics.median(h[name]) / statistics.median(b[name]),
            "min_ratio": min(h[name]) / min(b[name]),
            "n_base": len(b[name]), "n_head": len(h[name]),
        }
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", default="main", help="git ref of the reference side (main)")
    ap.add_argument("--factor", type=float, default=1.75,
                    help="fail when a benchmark is slower than base by more than this factor")
    ap.add_argument("--rounds", type=int, default=4, help="alternations base/head")
    ap.add_argument("--repeat", type=int, default=5, help="samples per benchmark per round")
    ap.add_argument("--bench", default=SUBSET, help="asv --bench regex (the fast subset)")
    ap.add_argument("--json", help="write per-benchmark ratios (head/base) to this file")
    args = ap.parse_args()

    from asv.commands.compare import Compare
    from asv.config import Config
    from asv.machine import Machine

    base_sha = git("rev-parse", "--verify", f"{args.base}^{{commit}}")
    head_sha = git("rev-parse", "HEAD")
    dirty = bool(git("diff", "--name-only", "HEAD", "--", "tape", "jit"))
    print(f"base {args.base} = {base_sha[:12]}; head = working tree at {head_sha[:12]}"
          f"{' + uncommitted changes' if dirty else ''}; factor {args.factor}; "
          f"{args.rounds} rounds x {args.repeat} samples", flush=True)

    os.makedirs(STATE, exist_ok=True)
    base_dir = extract_base(base_sha)
    head_dir = snapshot_head()
    sides = {"base": (base_sha, side_env(base_dir)), "head": (head_sha, side_env(head_dir))}
    confs = {}
    for side, (_sha, env) in sides.items():
        shutil.rmtree(os.path.join(HERE, "results-compare", side), ignore_errors=True)
        confs[side] = write_conf(side)
        print(f"$ python -m jit.warmup   ({side})", flush=True)
        subprocess.run([sys.executable, "-m", "jit.warmup"], cwd=STATE, env=env, check=True,
                       stdout=subprocess.DEVNULL)

    failed_runs = 0
    for r in range(args.rounds):
        order = ("base", "head") if r % 2 == 0 else ("head", "base")   # ABBA: no order bias
        for side in order:
            sha, env = sides[side]
            rc = asv(confs[side], env, "run", "--python=same", f"--set-commit-hash={sha}",
                     "--bench", args.bench, "-a", "rounds=1", "-a", f"repeat={args.repeat}",
                     "-a", "warmup_time=0.2", "--append-samples", "--show-stderr")
            failed_runs += rc != 0

    machine = Machine.get_unique_machine_name()
    head_conf = Config.load(confs["head"])
    base_rows = list(resultset(os.path.join(HERE, "results-compare", "base"), machine, base_sha))
    head_rows = list(resultset(head_conf.results_dir, machine, head_sha))
    if not base_rows or not head_rows:
        print("no results to compare", file=sys.stderr)
        return 2
    worsened, _improved = Compare.print_table(
        head_conf, base_sha, head_sha, factor=args.factor, split=False,
        resultset_1=iter(base_rows), resultset_2=iter(head_rows), machine=machine,
        commit_names={base_sha: args.base} if base_sha == head_sha
        else {base_sha: args.base, head_sha: "HEAD"})
    r = ratios(base_rows, head_rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"base": base_sha, "head": head_sha, "dirty": dirty,
                       "factor": args.factor, "rounds": args.rounds, "repeat": args.repeat,
                       "ratios": r}, f, indent=1)
    print()
    print(f"{'benchmark':68s} {'median':>7s} {'min':>7s}  (head/base)")
    for name, v in r.items():
        print(f"{name:68s} {v['median_ratio']:7.3f} {v['min_ratio']:7.3f}")
    if failed_runs:
        print(f"\n{failed_runs} asv run(s) reported errors", file=sys.stderr)
    if worsened:
        print(f"\nFAIL: a benchmark is slower than {args.base} by more than {args.factor}x "
              "(rows marked + or !)", file=sys.stderr)
        return 1
    print(f"\nOK: nothing slower than {args.base} by more than {args.factor}x")
    return 1 if failed_runs else 0


if __name__ == "__main__":
    sys.exit(main())

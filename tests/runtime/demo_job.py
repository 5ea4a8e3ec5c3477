"""The bundled demo job (demo/train.py under torchrun, 2 ranks, CUDA work on the GPU simulator),
started for a test and killed with its whole process group afterwards; or demo/train.py alone,
as a plain `python train.py` (one process, no RANK)."""
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time

from kernel_state import kill_tree

# The interpreter of each PyTorch the tests run: Debian's (torch 1.13) and the project's venv (pip
# torch 2.x, scripts/setup.sh), as tests/runtime/run_case.py's `torch = [...]` cases.
def torch_python(torch, source):
    return "/usr/bin/python3" if torch == "1.13" else os.path.join(os.path.abspath(source), ".venv", "bin", "python")


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def require_root():
    if os.geteuid() != 0:
        print("cannot run: needs root (BPF and ptrace)", flush=True)
        sys.exit(77 if os.environ.get("GTRACE_ALLOW_SKIP") == "1" else 1)


def _exit_on_sigterm(signum, frame):
    raise SystemExit(f"stopped by signal {signum}")  # runs the finally below: no job left running


def train_command(build, source, scenario, train_args=()):
    """demo/train.py in a scenario on the simulator, training until stopped (`train_args`: more
    of train.py's options)."""
    return [os.path.join(os.path.abspath(source), "demo/train.py"), "--scenario", scenario,
            "--cudart", os.path.join(os.path.abspath(build), "gpusim/libcudart.so.13"),
            "--kernels", os.path.join(os.path.abspath(build), "programs/libdemo_kernels.so"), "--steps", "1000000", *train_args]


@contextlib.contextmanager
def demo_job(build, source, scenario, port, env_extra=None, settle_s=2.0, single=False, train_args=(), torch="1.13"):
    """Yields (torchrun pid, temp dir) once both ranks train; with single, (the pid of
    `python3 demo/train.py` run alone, temp dir) once it trains. `torch`: "1.13" or "2"."""
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    env = dict(os.environ, **(env_extra or {}))
    for var in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        env.pop(var, None)
    launcher = [] if single else ["-m", "torch.distributed.run", "--nproc_per_node", "2", "--redirects", "1", "--tee", "1",
                                  "--master_port", str(port)]
    ready, count = ("ready pid", 1) if single else ("ready rank", 2)
    with tempfile.TemporaryDirectory() as tmp:
        log_path = os.path.join(tmp, "job.log")
        with open(log_path, "w") as log:
            job = subprocess.Popen([torch_python(torch, source), *launcher, *train_command(build, source, scenario, train_args)],
                                   stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            deadline = time.time() + 120
            while open(log_path).read().count(ready) < count:
                if time.time() > deadline or job.poll() is not None:
                    fail("the job did not start: " + open(log_path).read()[-2000:])
                time.sleep(0.5)
            time.sleep(settle_s)
            yield job.pid, tmp
        finally:
            kill_tree(job.pid)  # torch 2.x's ranks live in sessions of their own
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()

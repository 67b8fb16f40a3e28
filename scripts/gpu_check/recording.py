"""Running a program under cuflight from a build folder (stdlib only), for gpu-check and the
overhead benchmarks.

Two ways, same result (the program's events in JSONL logs under a directory):
- `cuflight run --out DIR -- argv...` (the CLI starts a private collector itself);
- a private `cuflight-collector --socket S --log-dir DIR` started here, and the program run with
  CUDA_INJECTION64_PATH=<build>/lib/libcuflight_inject.so and CUFLIGHT_COLLECTOR=S in its
  environment. This is what the benchmarks use, since every CUFLIGHT_* variable then reaches the
  injector exactly as given.
"""

import os
import pathlib
import signal
import subprocess
import tempfile
import time


class Build:
    """Paths inside a cuflight build folder."""

    def __init__(self, root):
        self.root = pathlib.Path(root).resolve()
        self.cli = self.root / "bin" / "cuflight"
        self.collector = self.root / "bin" / "cuflight-collector"
        self.inject = self.root / "lib" / "libcuflight_inject.so"
        self.examples = self.root / "bin" / "examples"
        self.launch_storm = self.root / "bin" / "launch_storm"
        self.poll_heavy = self.root / "bin" / "poll_heavy"
        self.null_subscriber = self.root / "lib" / "libcuflight_null_subscriber.so"

    def missing(self):
        """Names of the build outputs gpu-check needs that are not there."""
        need = [self.cli, self.collector, self.inject, self.examples]
        return [str(p.relative_to(self.root)) for p in need if not p.exists()]

    def has_run_command(self, env=None):
        """True when this build's CLI has `cuflight run` (its help names --out; a CLI without
        the command answers `run --help` with the top-level help)."""
        try:
            r = subprocess.run([str(self.cli), "run", "--help"], capture_output=True, text=True,
                               timeout=30, env=env)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return r.returncode == 0 and "--out" in r.stdout


class PrivateCollector:
    """A cuflight-collector of our own on a socket in a fresh 0700 directory (context manager).

    env() gives the variables that send a program's events to it. stop() ends it with SIGTERM
    (a clean stop: every acknowledged event is written) and returns its exit status."""

    def __init__(self, build, log_dir, env=None, extra_args=()):
        self.build = build
        self.extra_args = list(extra_args)
        self.log_dir = pathlib.Path(log_dir)
        self.base_env = env
        self.sock_dir = tempfile.mkdtemp(prefix="cuflight-sock.")
        self.socket = os.path.join(self.sock_dir, "collector.sock")
        self.proc = None
        self.stderr_path = os.path.join(self.sock_dir, "collector.log")

    def __enter__(self):
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                [str(self.build.collector), "--socket", self.socket, "--log-dir",
                 str(self.log_dir), "--log-level", "warn", *self.extra_args],
                stdout=subprocess.DEVNULL, stderr=err, env=self.base_env)
        deadline = time.monotonic() + 30
        while not os.path.exists(self.socket):
            if self.proc.poll() is not None:
                raise RuntimeError("cuflight-collector exited " + str(self.proc.returncode) +
                                   ": " + self.stderr().strip())
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("cuflight-collector did not create its socket in 30 s")
            time.sleep(0.05)  # polling for the socket file, with a deadline
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def stderr(self):
        try:
            with open(self.stderr_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def env(self, extra=None):
        env = dict(self.base_env if self.base_env is not None else os.environ)
        env["CUDA_INJECTION64_PATH"] = str(self.build.inject)
        env["CUFLIGHT_COLLECTOR"] = self.socket
        env.update(extra or {})
        return env

    def stop(self):
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rc = self.proc.returncode
        self.proc = None
        try:
            os.unlink(self.stderr_path)
            os.rmdir(self.sock_dir)
        except OSError:
            pass
        return rc


def record(build, argv, out_dir, use_run=True, env=None, timeout=600):
    """Runs argv under cuflight with its logs in out_dir. Returns the CompletedProcess (text
    stdout and stderr; the program's own stdout is its ground truth)."""
    out_dir = pathlib.Path(out_dir)
    if use_run:
        cmd = [str(build.cli), "run", "--out", str(out_dir), "--", *map(str, argv)]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    with PrivateCollector(build, out_dir, env=env) as collector:
        return subprocess.run(list(map(str, argv)), capture_output=True, text=True,
                              timeout=timeout, env=collector.env())

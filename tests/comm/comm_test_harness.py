"""Launches comm_rank processes (one per rank) and collects their JSON lines.

Every rank binds 127.0.0.1:0 and publishes its address in a fresh
rendezvous directory, so tests never race for ports.
"""
import json
import os
import signal
import subprocess
import tempfile
import threading
import time

# Under bazel test, the runfiles copy (Python resolves the script's symlink
# to the source tree, where the binary is not).
if "TEST_SRCDIR" in os.environ:
    RANK_BINARY = os.path.join(os.environ["TEST_SRCDIR"], os.environ["TEST_WORKSPACE"],
                               "tests", "comm", "comm_rank")
else:
    RANK_BINARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                               "bazel-bin", "tests", "comm", "comm_rank")


class Rank:
    """One comm_rank process; stdout lines are parsed as they arrive."""

    def __init__(self, rank, world, rendezvous, args, env):
        self.rank = rank
        self.lines = []          # (unix time received, parsed JSON)
        self._lock = threading.Lock()
        self.stderr_path = os.path.join(rendezvous, "rank%d-%d.stderr" % (rank, id(self)))
        full_env = dict(os.environ)
        full_env.update(env or {})
        self._stderr = open(self.stderr_path, "w")
        cmd = [RANK_BINARY, "--rank=%d" % rank, "--world_size=%d" % world,
               "--rendezvous_dir=" + rendezvous] + list(args)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._stderr,
                                     env=full_env, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                item = json.loads(line)
            except ValueError:
                item = {"unparsed": line}
            with self._lock:
                self.lines.append((time.time(), item))

    def items(self):
        with self._lock:
            return [item for _, item in self.lines]

    def first(self, key):
        with self._lock:
            for t, item in self.lines:
                if key in item:
                    return t, item
        return None, None

    def wait_for(self, key, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            t, item = self.first(key)
            if item is not None:
                return item
            if self.proc.poll() is not None:
                self._reader.join(1)
                t, item = self.first(key)
                return item
            time.sleep(0.01)
        return None

    def wait(self, timeout):
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
            code = "timeout"
        self._reader.join(5)
        self._close_files()
        return code

    def _close_files(self):
        if not self._stderr.closed:
            self._stderr.close()
        if self.proc.stdout is not None and not self.proc.stdout.closed:
            try:
                self.proc.stdout.close()
            except OSError:
                pass

    def stderr_tail(self, n=30):
        try:
            with open(self.stderr_path) as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def describe(self):
        return "rank %d (pid %d) stdout=%s\nstderr tail:\n%s" % (
            self.rank, self.proc.pid, self.items(), self.stderr_tail())

    def signal(self, sig):
        try:
            os.kill(self.proc.pid, sig)
        except ProcessLookupError:
            pass


class Group:
    """A rendezvous directory plus the processes started in it."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="comm-test-", dir=os.environ.get("TEST_TMPDIR"))
        self.ranks = []

    def start(self, rank, world, args=(), env=None):
        r = Rank(rank, world, self.dir, args, env)
        self.ranks.append(r)
        return r

    def start_all(self, world, args=(), env=None):
        return [self.start(r, world, args, env) for r in range(world)]

    def close(self):
        for r in self.ranks:
            if r.proc.poll() is None:
                r.signal(signal.SIGCONT)
                r.proc.kill()
            r.wait(5)

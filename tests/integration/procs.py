"""Helpers the integration tests share for the processes they start: stopping one within a bound,
and printing the end of its log when a test fails."""
import os
import subprocess


def stop(proc, timeout=10):
    """SIGTERM, then SIGKILL when it has not exited within `timeout` seconds. None or an exited
    process is fine."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def print_tail(path, lines=20):
    """The last `lines` lines of the log at `path`, under its name; nothing when it cannot be read."""
    try:
        with open(path) as f:
            print(f"--- {os.path.basename(path)} (last lines)\n" + "\n".join(f.read().splitlines()[-lines:]))
    except OSError:
        pass

"""Helpers the integration tests share: the Failure a check raises, waiting for a condition within
a bound, stopping a process within a bound, and printing the end of its log when a test fails."""
import http.client
import os
import subprocess
import time


class Failure(Exception):
    """A check of an integration test did not hold; the message says which."""


def wait_for(what, predicate, seconds, ignore=(OSError, http.client.HTTPException), interval=0.1):
    """Polls `predicate` until it is true; an error of a kind in `ignore` counts as not yet (a server
    still starting). Failure after `seconds`."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            if predicate():
                return
        except ignore:
            pass
        time.sleep(interval)
    raise Failure(f"timed out after {seconds} s waiting for {what}")


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

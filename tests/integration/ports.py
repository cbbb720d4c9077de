"""free_port(): a loopback port to hand to a process that binds it later.

Picking with bind(0) draws from the kernel's ephemeral range (net.ipv4.ip_local_port_range), which
the port-0 listeners and outgoing connections of the tests running in parallel draw from too, so the
port could be taken before the process binds it (seen: a manager that could not listen). Ports are
picked at random below that range instead, and checked free now, and never twice in one process (two
picks in a row are not held, so they could otherwise coincide: seen, a gateway's port equal to its
manager's); two picks of the same port by tests running at once remain possible, at about 1 in 20,000.
"""
import random
import socket

_rng = random.SystemRandom()
_given = set()


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port():
    high = min(_ephemeral_low(), 65536) - 1
    for _ in range(200):
        port = _rng.randint(10000, max(high, 10001))
        if port in _given:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _given.add(port)
        return port
    with socket.socket() as s:  # a crowded range: the kernel's pick
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _given.add(port)
    return port

"""What a stranger on the network can throw at a process's TCP ports.

Finds a process's listening TCP sockets from /proc (its socket inodes in
/proc/PID/fd matched against /proc/PID/net/tcp{,6}), not from any
configuration, and sends each the inputs a careless scanner or a hostile
peer would: random bytes of many sizes, length prefixes (0, 15, 2^32,
2^40) followed by a short body and a close, single bytes at intervals, and
bursts of connect-and-close. Also reads a process's CPU time and its
sockets in CLOSE-WAIT, to check what the inputs left behind.
"""

import os
import random
import socket
import struct
import threading
import time

TCP_LISTEN = "0A"
TCP_CLOSE_WAIT = "08"


def _socket_inodes(pid):
    inodes = set()
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    return inodes


def _decode_address(hex_address, ipv6):
    host_hex, port_hex = hex_address.split(":")
    raw = bytes.fromhex(host_hex)
    if ipv6:
        # Four 32-bit words, each in host (little-endian) order.
        raw = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
        host = socket.inet_ntop(socket.AF_INET6, raw)
        if host.startswith("::ffff:") and "." in host:
            host = host[len("::ffff:"):]  # an IPv4 address on an IPv6 socket
    else:
        host = socket.inet_ntop(socket.AF_INET, raw[::-1])
    return host, int(port_hex, 16)


def _tcp_sockets(pid):
    """(state, (host, port), ipv6) of every TCP socket the process holds."""
    inodes = _socket_inodes(pid)
    found = []
    for name, ipv6 in (("tcp", False), ("tcp6", True)):
        try:
            with open(f"/proc/{pid}/net/{name}") as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[9] in inodes:
                found.append((fields[3], _decode_address(fields[1], ipv6), ipv6))
    return found


def listening_ports(pid):
    """[(host, port)] the process listens on, from /proc."""
    return sorted({(host, port) for state, (host, port), _ in _tcp_sockets(pid)
                   if state == TCP_LISTEN})


def close_wait_count(pid):
    return sum(1 for state, _, _ in _tcp_sockets(pid) if state == TCP_CLOSE_WAIT)


def cpu_seconds(pid):
    """User + system CPU time of the whole process (all threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime


def cpu_share(pid, seconds=1.0):
    """Cores the process used over `seconds`."""
    before = cpu_seconds(pid)
    time.sleep(seconds)
    return (cpu_seconds(pid) - before) / seconds


def _connect(address, timeout=2.0):
    host, port = address
    if host in ("0.0.0.0", "::"):
        host = "127.0.0.1" if host == "0.0.0.0" else "::1"
    s = socket.create_connection((host, port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def _send_and_close(address, payload, linger=0.01):
    try:
        s = _connect(address)
    except OSError:
        return
    try:
        s.sendall(payload)
        time.sleep(linger)
    except OSError:
        pass
    finally:
        s.close()


def _payloads(rng):
    """Every input sent on a connection of its own."""
    sizes = [1, 2, 3, 7, 8, 15, 16, 24, 31, 64, 100, 511, 512, 513, 1024, 4096, 8192, 65536]
    for size in sizes:
        yield rng.randbytes(size)
    yield b"\xff" * 24
    yield b"\x00" * 8192
    yield b"\xff" * 4096
    body = rng.randbytes(64)
    for length in (0, 15, 2**32, 2**40):
        for fmt in ("<Q", ">Q", "<I", ">I"):
            if length >= 2**32 and fmt.endswith("I"):
                continue
            yield struct.pack(fmt, length) + body
        # An announced 2^40-byte message, then 4 KiB of it.
        yield struct.pack("<Q", length) + rng.randbytes(4096)
    # A one-byte message id and a 32-bit length (UCX's TCP transport frames
    # its messages so), for the ids around its connection-management one.
    for am_id in (0, 1, 2, 31, 32, 33, 255):
        for length in (0, 15, 2**16, 2**32 - 1):
            yield struct.pack("<BI", am_id, length) + body


def _trickle(address, count=5, interval=0.2):
    """Single bytes at intervals, then a close."""
    try:
        s = _connect(address)
    except OSError:
        return
    try:
        for _ in range(count):
            s.send(bytes([random.randrange(256)]))
            time.sleep(interval)
    except OSError:
        pass
    finally:
        s.close()


def _connect_burst(address, count=100):
    for _ in range(count):
        try:
            _connect(address).close()
        except OSError:
            pass


def sweep(addresses, seed=39):
    """Sends every input to every address (ports in parallel, inputs in turn)."""
    def attack(address, rng):
        for payload in _payloads(rng):
            _send_and_close(address, payload)
        _trickle(address)
        _connect_burst(address)
    threads = [threading.Thread(target=attack, args=(a, random.Random(seed + i)))
               for i, a in enumerate(addresses)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

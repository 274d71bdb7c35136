"""A Dask scheduler named on the command line (``release --scheduler``, ``sweep --scheduler``):
its address checked, and the server behind it probed, before a Dask client connects.

A Dask client trusts the length headers of every message it reads: a server that answers the
first connection with eight 0xff bytes made the client try to allocate 3.07 EiB (a traceback,
then a 30-second hang while the client closed). The checks here run first, bounded in time and
in what they read:

* the address: ``tcp://HOST:PORT`` (or ``HOST:PORT``): a host name, an IPv4 address or a
  bracketed IPv6 address, a port from 1 to 65535; anything else is refused before any connection;
* the probe: one TCP connection (:data:`PROBE_TIMEOUT` seconds to connect and to answer), on
  which a Dask scheduler sends its handshake first, unasked: an 8-byte length, then that many
  bytes holding a frame count and the frames' lengths. A length above
  :data:`MAX_HANDSHAKE_BYTES` (a real handshake is a few hundred bytes), frames that do not add
  up, or no answer in time: not a Dask scheduler, refused. Nothing is sent to the server.

Every refusal is a :class:`SchedulerError` (exit code 2) naming the address and the rule.
:func:`client_errors` are the exceptions a Dask client raises on a hostile or broken server after
the probe (a later message announced larger than memory, a closed connection, a timeout), for
the callers to turn into the same clear refusal.
"""
from __future__ import annotations

import re
import socket
import struct

__all__ = ["MAX_HANDSHAKE_BYTES", "PROBE_TIMEOUT", "SchedulerError", "check_scheduler",
           "client_errors", "close_client", "parse_address"]

MAX_HANDSHAKE_BYTES = 1 << 20   # a Dask handshake is some 300 bytes
MAX_HANDSHAKE_FRAMES = 64
PROBE_TIMEOUT = 10.0

_ADDRESS = re.compile(r"(?:tcp://)?(?P<host>\[[0-9A-Fa-f:.]{2,45}\]|[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?)"
                      r":(?P<port>[0-9]{1,5})")
_RULE = ("(rule: --scheduler is a Dask scheduler's address tcp://HOST:PORT, inside the enclave; "
         "docs/faults.md)")


class SchedulerError(RuntimeError):
    """The --scheduler address is unusable, or the server there is not a Dask scheduler."""

    exit_code = 2


def parse_address(address: object) -> tuple[str, int]:
    """(host, port) of ``tcp://HOST:PORT`` or ``HOST:PORT``; SchedulerError otherwise."""
    text = address if isinstance(address, str) else ""
    match = _ADDRESS.fullmatch(text) if len(text) <= 300 else None
    if match is None:
        shown = repr(text[:80]) if isinstance(address, str) else type(address).__name__
        raise SchedulerError(f"--scheduler {shown}: not an address of the form tcp://HOST:PORT {_RULE}")
    port = int(match.group("port"))
    if not 1 <= port <= 65535:
        raise SchedulerError(f"--scheduler {text}: port {port} is not from 1 to 65535 {_RULE}")
    return match.group("host").strip("[]"), port


def _receive(sock: socket.socket, size: int) -> bytes:
    """Exactly ``size`` bytes (at most MAX_HANDSHAKE_BYTES, checked by the caller)."""
    chunks, got = [], 0
    while got < size:
        block = sock.recv(min(size - got, 1 << 16))
        if not block:
            raise ConnectionError("the server closed the connection")
        chunks.append(block)
        got += len(block)
    return b"".join(chunks)


def _handshake_problem(sock: socket.socket) -> str | None:
    """None when the server's first message has the shape of a Dask handshake; else why not."""
    (size,) = struct.unpack("<Q", _receive(sock, 8))
    if not 8 <= size <= MAX_HANDSHAKE_BYTES:
        return (f"its first message announces {size:,} bytes, where a Dask scheduler's handshake "
                f"has a few hundred (at most {MAX_HANDSHAKE_BYTES:,} are read)")
    body = _receive(sock, size)
    (frames,) = struct.unpack_from("<Q", body)
    if not 1 <= frames <= MAX_HANDSHAKE_FRAMES or 8 * (1 + frames) > size:
        return f"its first message announces {frames:,} frames in {size:,} bytes"
    lengths = struct.unpack_from(f"<{frames}Q", body, 8)
    if sum(lengths) > MAX_HANDSHAKE_BYTES:
        return f"its first message announces frames of {sum(lengths):,} bytes"
    return None


def check_scheduler(address: object, timeout: float = PROBE_TIMEOUT) -> str:
    """Check ``address`` and probe the server there (see the module docstring); return the
    address as Dask takes it (``tcp://HOST:PORT``). SchedulerError naming the address and rule."""
    host, port = parse_address(address)
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            problem = _handshake_problem(sock)
    except socket.timeout:
        problem = f"no Dask handshake within {timeout:g} s"
    except (OSError, struct.error) as exc:
        problem = f"cannot connect ({getattr(exc, 'strerror', None) or exc})"
    if problem:
        raise SchedulerError(f"--scheduler {address}: cannot use the Dask cluster: {problem}; nothing "
                             f"was sent to it {_RULE}")
    return str(address) if str(address).startswith("tcp://") else f"tcp://{address}"


def client_errors() -> tuple[type[BaseException], ...]:
    """What a Dask client raises on a broken or hostile server after the probe: a message
    announced larger than memory (ValueError 'Maximum allowed dimension exceeded',
    MemoryError, OverflowError), a closed connection, a timeout, a message it cannot decode."""
    errors: list[type[BaseException]] = [OSError, TimeoutError, ValueError, MemoryError, OverflowError,
                                         EOFError, struct.error]
    try:
        from distributed.comm.core import CommClosedError

        errors.append(CommClosedError)
    except ImportError:   # pragma: no cover - optional dependency
        pass
    return tuple(errors)


def close_client(client) -> None:
    """Close a Dask client (None: nothing) without waiting long on a server that does not answer."""
    if client is None:
        return
    try:
        client.close(timeout=5)
    except Exception:  # noqa: BLE001 - closing a broken connection: nothing more to do
        pass

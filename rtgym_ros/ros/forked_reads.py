"""
Run the parameters reader in a fork of a process that imported rclpy once (``fork_server.py``).

``run_reader`` gives what a fresh interpreter running the reader would give (its stdout, its
stderr, its exit code, whether it was stopped at the timeout) in about 20 ms instead of 0.18 s.
The server starts at the first read of this process and ends with it, or once no read came
for :data:`IDLE_CLOSE` seconds (reads come in bursts, when envs and nodes start: a training
run keeps no idle interpreter beside it; the next read starts another). Where it cannot run
(no ``fork``, a server that will not start or fork, a server that died), ``run_reader``
returns None and the caller starts a fresh interpreter, as every read did without it.
"""

import atexit
import os
from pathlib import Path
import pickle
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, NamedTuple

_SERVER = Path(__file__).with_name('fork_server.py')
# Runs a script (the server, or the reader in a fresh interpreter) without the working
# directory on sys.path, so that a file there (an rclpy.py, a yaml.py) cannot stand in for a
# module it imports.
BOOT = ('import runpy, sys; sys.path[:] = [p for p in sys.path if p]; '
        'runpy.run_path(sys.argv[1], run_name="__main__")')
# Seconds to wait for the server's start (an interpreter, rclpy's import), and for its word on
# a fork (started, exited).
_START_TIMEOUT = 60.0
_REPLY_TIMEOUT = 10.0
IDLE_CLOSE = 30.0
"""Seconds without a read after which this process's server is closed."""


class ReaderRun(NamedTuple):
    """What the reader's process gave: as ``Popen.communicate`` and ``returncode`` give it."""

    out: bytes
    err: bytes
    returncode: int
    timed_out: bool


class _ServerGone(Exception):
    """The server did not answer: it is not used again in this process."""


class _Server:
    """The fork server of this process and its control socket."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.process = subprocess.Popen(
                [sys.executable, '-c', BOOT, str(_SERVER), str(theirs.fileno())],
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.control = ours
        try:
            self.control.settimeout(_START_TIMEOUT)
            said = self.control.recv(16)
            if said != b'ready':
                raise _ServerGone('the fork server cannot fork here' if said else
                                  'the fork server ended before it was ready')
        except BaseException:
            self.close()
            raise

    def run(self, reader: Path, request: bytes, env: dict[str, str],
            timeout: float) -> ReaderRun:
        """Run ``reader`` in a fork with ``request`` on its stdin; stop it at ``timeout``."""
        with tempfile.TemporaryFile() as stdin, tempfile.TemporaryFile() as stderr:
            stdin.write(request)
            stdin.flush()
            stdin.seek(0)
            out_read, out_write = os.pipe()
            pid = None
            try:
                try:
                    message = pickle.dumps((str(reader), os.getcwd(), env, timeout))
                    socket.send_fds(self.control, [message],
                                    [stdin.fileno(), out_write, stderr.fileno()])
                finally:
                    os.close(out_write)
                pid = self._receive('started', _REPLY_TIMEOUT)
                out, timed_out = _read_to_the_end(out_read, timeout)
                if timed_out:
                    _kill(pid)  # not reaped yet: the server waits for it
                returncode = self._receive('exited', _REPLY_TIMEOUT)
                pid = None
            finally:
                os.close(out_read)
                if pid is not None:  # interrupted (Ctrl-C), or the server is gone
                    _kill(pid)
            stderr.seek(0)
            return ReaderRun(out, stderr.read(), returncode, timed_out)

    def _receive(self, what: str, timeout: float) -> Any:
        self.control.settimeout(timeout)
        try:
            message = self.control.recv(4096)
        except OSError as error:
            raise _ServerGone(f'no {what} from the fork server: {error!r}') from None
        if not message:
            raise _ServerGone(f'the fork server ended before {what}')
        kind, value = pickle.loads(message)
        if kind != what:
            raise _ServerGone(f'the fork server said {kind!r} before {what!r}')
        return value

    def close(self) -> None:
        """End the server: it exits once its end of the socket closes."""
        self.control.close()
        try:
            self.process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


_lock = threading.Lock()
_server: _Server | None = None
_last_read = 0.0  # time.monotonic() at the end of the last read
_unavailable = not (hasattr(os, 'fork') and hasattr(socket, 'send_fds')
                    and sys.platform.startswith('linux'))


def run_reader(reader: Path, request: bytes, env: dict[str, str],
               timeout: float) -> ReaderRun | None:
    """
    Run ``reader`` in a fork of the server; None where the server cannot run it.

    Reads of several threads take turns. A Ctrl-C during a read stops the reader's process.
    """
    global _server, _unavailable, _last_read
    with _lock:
        if _unavailable:
            return None
        try:
            if _server is None:
                _server = _Server()
                _close_when_idle(_server)
            return _server.run(reader, request, env, timeout)
        except (_ServerGone, OSError, subprocess.SubprocessError):
            _unavailable = True  # a fresh interpreter per read from now on
            _close_server()
            return None
        except BaseException:  # a Ctrl-C: the server may be mid-request; a new one next time
            _close_server()
            raise
        finally:
            _last_read = time.monotonic()


def _close_when_idle(server: _Server) -> None:
    """Close ``server`` once no read came for :data:`IDLE_CLOSE` s (a thread while it runs)."""
    def watch() -> None:
        while True:
            time.sleep(max(_last_read + IDLE_CLOSE - time.monotonic(), 0.01))
            with _lock:  # never during a read
                if _server is not server:
                    return  # closed meanwhile (a failure, a Ctrl-C, the exit)
                if time.monotonic() - _last_read >= IDLE_CLOSE:
                    _close_server()
                    return

    # Not named rtgym_ros...: it belongs to the process, not to an env or a node.
    threading.Thread(target=watch, name='params fork server: idle close', daemon=True).start()


def _read_to_the_end(fd: int, timeout: float) -> tuple[bytes, bool]:
    """Read ``fd`` until its end or ``timeout``; return what came and whether time ran out."""
    deadline = time.monotonic() + timeout
    chunks = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return b''.join(chunks), True
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b''.join(chunks), False
        chunks.append(chunk)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _close_server() -> None:
    global _server
    server, _server = _server, None
    if server is not None:
        server.close()


def _forget_server_in_a_forked_child() -> None:
    """Let a fork of this process (multiprocessing's, say) start a server of its own."""
    global _server, _lock
    if _server is not None:
        _server.control.close()  # this copy only: the parent's server runs on
    _server, _lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_server_in_a_forked_child)
atexit.register(_close_server)

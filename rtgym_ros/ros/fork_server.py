"""
Forks one child per parameters read, from a process that imported rclpy once.

Run as a script by ``forked_reads.py``. A fresh interpreter spends most of a read's 0.17 s
importing rclpy; a fork of this process starts in about 2 ms. Each child runs the reader
script it is sent (``rcl_parameters.py``) as ``__main__`` with the descriptors it is sent as
its stdin (the request), stdout (the answer) and stderr, in the caller's working directory and
environment of that read: the process a fresh interpreter would have been, less the imports.

``import rclpy`` loads LTTng-UST, whose listener threads run from then on. Each fork goes
through LTTng's fork hooks, as its ``liblttng-ust-fork.so`` preload would call them, so that no
child inherits a lock one of those threads held. Threads and no hooks to find: this process
says so and ends, and the caller starts a fresh interpreter per read.

Only the standard library and rclpy (to warm up) are imported here. The protocol, on the
``SOCK_SEQPACKET`` socket given in ``argv``: this process sends ``b'ready'`` (or ``b'no'``);
each request is a pickled ``(reader, cwd, env, timeout)`` with three descriptors; for each,
``('started', pid)`` and ``('exited', returncode)`` come back. The socket's end ends this
process: the caller closed it, or died (a fork of the caller closes its copy at once). Not
``PR_SET_PDEATHSIG``: it follows the caller's thread that started this process, not the caller.
"""

import ctypes
import math
import os
import pickle
import runpy
import signal
import socket
import sys
import traceback
from typing import Any, Callable, NoReturn

_SIGSET_BYTES = 128  # glibc's sigset_t
# LTTng-UST's fork hooks: 2.12's names, then 2.13's.
_HOOK_NAMES = (('ust_before_fork', 'ust_after_fork_parent', 'ust_after_fork_child'),
               ('lttng_ust_before_fork', 'lttng_ust_after_fork_parent',
                'lttng_ust_after_fork_child'))
# Seconds a child may outlive its read's timeout, should the caller be gone and not kill it.
_CHILD_GRACE = 5


def serve(control: socket.socket) -> None:
    """Answer requests until the caller closes its end of ``control``."""
    hooks = _fork_hooks()
    if hooks is None and len(os.listdir('/proc/self/task')) > 1:
        control.send(b'no')
        return
    control.send(b'ready')
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, 1 << 20, 3)
        except OSError:
            return
        if not message:
            return  # the caller closed its end, or died
        reader, cwd, env, timeout = pickle.loads(message)
        pid = _fork(hooks)
        if pid == 0:
            _run_reader(control, fds, reader, cwd, env, timeout)
        for fd in fds:
            os.close(fd)
        try:
            control.send(pickle.dumps(('started', pid)))
            _, status = os.waitpid(pid, 0)
            control.send(pickle.dumps(('exited', os.waitstatus_to_exitcode(status))))
        except OSError:
            return


def _fork(hooks: tuple[Callable, Callable, Callable] | None) -> int:
    """``os.fork()``, between LTTng-UST's fork hooks where it is loaded."""
    if hooks is None:
        return os.fork()
    before, after_parent, after_child = hooks
    signals = ctypes.create_string_buffer(_SIGSET_BYTES)
    before(signals)
    pid = os.fork()
    (after_child if pid == 0 else after_parent)(signals)
    return pid


def _fork_hooks() -> tuple[Callable, Callable, Callable] | None:
    """Return the fork hooks of the LTTng-UST this process loaded, or None."""
    with open('/proc/self/maps') as maps:
        paths = {line.split()[-1] for line in maps if '/liblttng-ust' in line}
    for path in sorted(paths):
        library = ctypes.CDLL(path)
        for names in _HOOK_NAMES:
            if all(hasattr(library, name) for name in names):
                hooks = tuple(getattr(library, name) for name in names)
                for hook in hooks:
                    hook.argtypes, hook.restype = [ctypes.c_void_p], None
                return hooks  # type: ignore[return-value]
    return None


def _run_reader(control: socket.socket, fds: list[int], reader: str, cwd: str,
                env: dict[str, str], timeout: float) -> NoReturn:
    """In the child: become the reader's process, run it, and exit with its code."""
    code = 1
    try:
        control.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        signal.alarm(math.ceil(timeout) + _CHILD_GRACE)  # ends it if the caller cannot
        sys.argv = [reader]
        runpy.run_path(reader, run_name='__main__')
        code = 0
    except SystemExit as ended:
        code = _exit_code(ended.code)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def _exit_code(value: Any) -> int:
    """Return the exit code Python gives ``sys.exit(value)``."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


def _main(argv: list[str]) -> None:
    """``argv`` ends with the control socket's descriptor."""
    control = socket.socket(fileno=int(argv[-1]))
    try:
        import rclpy  # noqa: F401  (the import each child is spared)
    except Exception:
        pass  # each child imports it again, and says why it cannot
    serve(control)


if __name__ == '__main__':
    _main(sys.argv)

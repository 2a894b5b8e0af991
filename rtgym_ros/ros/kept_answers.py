"""
rcl's answers to the parameter reads made before in this process, by what they read.

rcl's answer is a function of the reader, the command line with the bytes of each params file,
and the node's name and namespace: reading the same again gives the same parameters, so only
the first read runs a child process (an interpreter and rclpy's import, most of a read's
0.1–0.2 s). A training script that makes and closes its env again and again, a sweep, an
evaluation env: each reads its config once. Only answers are kept, never a refusal or a
failure (those are read again, and said again, each time); each hit is a fresh copy.
"""

from collections import OrderedDict
import hashlib
from pathlib import Path
import pickle
from typing import Any

# Answers kept; the oldest goes first.
KEPT = 32


class KeptAnswers:
    """
    The child's output for each read that answered, keyed by what the read read.

    Without a lock: each step is one call of the ``OrderedDict``'s C code, atomic under the
    GIL, so a forked child inherits no lock held by another thread.
    """

    def __init__(self, size: int = KEPT) -> None:
        self._size = size
        self._answers: OrderedDict[bytes, tuple[bytes, bytes]] = OrderedDict()

    @staticmethod
    def key(reader: Path, request: dict[str, Any]) -> bytes | None:
        """
        Return what ``request`` read through ``reader``, hashed; None if a file is unreadable.

        Each ``--params-file`` is keyed by its bytes, not its path: the same file under another
        name answers the same, and a file changed since its last read is read again.
        """
        args = list(request['args'])
        try:
            contents = [reader.read_bytes()]
            for index in range(1, len(args)):
                if args[index - 1] == '--params-file':
                    args[index] = Path(args[index]).read_bytes()
        except OSError:
            return None  # rcl says why, in a read of its own
        # All but the name the read's errors give it (only answers are kept).
        rest = sorted((name, value) for name, value in request.items()
                      if name not in ('args', 'source'))
        return hashlib.sha256(pickle.dumps((contents, args, rest))).digest()

    def get(self, key: bytes | None) -> tuple[bytes, bytes] | None:
        """Return the child's stdout and stderr of a read that answered for ``key``, or None."""
        return None if key is None else self._answers.get(key)

    def keep(self, key: bytes, out: bytes, err: bytes) -> None:
        """Keep a read's answer (``out``, pickled) and what rcl said with it (``err``)."""
        self._answers[key] = (out, err)
        while len(self._answers) > self._size:
            try:
                self._answers.popitem(last=False)
            except KeyError:  # another thread took the last one
                break

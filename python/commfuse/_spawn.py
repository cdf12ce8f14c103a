"""``commfuse.spawn``: run a function on W local processes, like torch.multiprocessing.spawn."""

from __future__ import annotations

import multiprocessing as mp
import multiprocessing.connection as mpc
import numbers
import os
import pickle
import signal
import socket
import time
import traceback
from typing import Any, Callable, Optional, Sequence


def _remove_segments(pid: int, launch_id: str) -> int:
    """Remove the shared-memory segments process ``pid`` of this launch left
    (``/dev/shm/commfuse-<pid>-<launch_id>-*``): a rank killed between creating its segment and
    telling its peers the name leaves it where no peer can find it (as ``commfuse launch``
    does, comm/shm/segment.hpp)."""
    removed = 0
    try:
        prefix = f"commfuse-{pid}-{launch_id}-"
        names = [n for n in os.listdir("/dev/shm") if n.startswith(prefix)]
    except OSError:
        return 0
    for n in names:
        try:
            os.unlink(os.path.join("/dev/shm", n))
            removed += 1
        except OSError:
            pass
    return removed


class SpawnError(Exception):
    """A spawned process failed. ``rank`` is its rank (= torch's ``error_index``), ``pid``
    its process id."""

    def __init__(self, message: str, rank: int, pid: Optional[int]) -> None:
        super().__init__(message)
        self.rank = rank
        self.error_index = rank  # torch.multiprocessing's name
        self.pid = pid

    def __reduce__(self) -> Any:
        return (type(self), (self.args[0], self.rank, self.pid))


class ProcessRaisedException(SpawnError):
    """fn raised in a spawned process. The message carries that process's traceback;
    ``exception`` is the exception itself where it could be pickled there and unpickled
    here (else None: e.g. an exception whose __init__ takes more than its message)."""

    def __init__(self, message: str, rank: int, pid: Optional[int],
                 exception: Optional[BaseException] = None) -> None:
        super().__init__(message, rank, pid)
        self.exception = exception

    def __reduce__(self) -> Any:
        return (type(self), (self.args[0], self.rank, self.pid, self.exception))


class ProcessExitedException(SpawnError):
    """A spawned process died without raising (os._exit, a signal). ``exit_code`` is its
    exit status (negative: killed by signal -exit_code)."""

    def __init__(self, message: str, rank: int, pid: Optional[int], exit_code: int) -> None:
        super().__init__(message, rank, pid)
        self.exit_code = exit_code

    def __reduce__(self) -> Any:
        return (type(self), (self.args[0], self.rank, self.pid, self.exit_code))


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (the OS's pick), for ``tcp://`` / ``MASTER_PORT``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _child(fn: Callable[..., Any], rank: int, nprocs: int, args: Sequence[Any],
           env: dict[str, str], conn: mpc.Connection) -> None:
    os.environ.update(env)
    os.environ["RANK"] = os.environ["LOCAL_RANK"] = str(rank)
    # The exception and the result go pickled into bytes of their own, so that the parent
    # always reads the message and unpickles them where it can: an exception whose __init__
    # takes two arguments pickles but does not unpickle, and its TypeError escaped join(),
    # leaving the ranks running unsupervised.
    try:
        result = fn(rank, *args)
    except BaseException as e:  # noqa: B902 - every failure goes to the parent
        text = traceback.format_exc()
        try:
            payload: Optional[bytes] = pickle.dumps(e)
        except Exception:  # the exception (or something it holds) cannot be pickled
            payload = None
        conn.send(("raised", text, payload))
        conn.close()
        raise SystemExit(1) from None
    try:
        conn.send(("ok", pickle.dumps(result)))
    except Exception:
        conn.send(("raised", "fn's return value cannot be pickled:\n" + traceback.format_exc(),
                   None))
    conn.close()


class SpawnContext:
    """The processes of one :func:`spawn` call (returned by ``spawn(..., join=False)``)."""

    def __init__(self, processes: list[Any], conns: list[mpc.Connection], grace: float,
                 launch_id: str = "0") -> None:
        self.processes = processes
        self._conns = conns
        self._launch_id = launch_id
        self._grace = grace
        self._results: list[Any] = [None] * len(processes)
        self._done = [False] * len(processes)
        self._failure: Optional[SpawnError] = None

    def pids(self) -> list[Optional[int]]:
        """Process ids in rank order."""
        return [p.pid for p in self.processes]

    def _receive(self, rank: int) -> None:
        conn = self._conns[rank]
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            msg = None
        self._done[rank] = True
        if msg is None:
            return  # died without a word: the exit code tells (see _check_exit)
        pid = self.processes[rank].pid
        if msg[0] == "ok":
            try:
                self._results[rank] = pickle.loads(msg[1])
                return
            except Exception:
                msg = ("raised", "fn's return value cannot be unpickled in the parent:\n" +
                       traceback.format_exc(), None)
        if self._failure is None:
            try:
                exception = None if msg[2] is None else pickle.loads(msg[2])
            except Exception:  # e.g. an __init__ of two arguments: the text still tells
                exception = None
            self._failure = ProcessRaisedException(
                f"process {rank} (rank {rank}, pid {pid}) terminated with the following "
                f"error:\n{msg[1]}", rank, pid, exception)

    def _check_exit(self, rank: int) -> None:
        p = self.processes[rank]
        if p.exitcode not in (0, None) and self._failure is None:
            code = p.exitcode
            how = (f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}")
            self._failure = ProcessExitedException(
                f"process {rank} (rank {rank}, pid {p.pid}) terminated with {how}", rank, p.pid,
                code)

    def _terminate(self, ranks: set[int]) -> None:
        for i in ranks:
            self.processes[i].terminate()
        for i in ranks:
            self.processes[i].join(5)
            if self.processes[i].is_alive():
                self.processes[i].kill()
                self.processes[i].join()

    def join(self, timeout: Optional[float] = None) -> list[Any]:
        """Wait for every process; return fn's return values in rank order.

        On the first failure the others get ``grace`` seconds to finish (a peer of a failed
        rank fails by itself within about 0.1 s), then are terminated, and the failure is
        raised: :class:`ProcessRaisedException` (with the child's traceback and rank) or
        :class:`ProcessExitedException`. Past ``timeout`` seconds (None: no limit) the
        processes still running are terminated and :class:`TimeoutError` is raised, where
        torch's ``SpawnContext.join`` returns False and leaves them running (this one returns
        the results instead of True).
        """
        user_deadline = None if timeout is None else time.monotonic() + timeout
        grace_deadline: Optional[float] = None
        pending = set(range(len(self.processes)))
        while pending:
            if self._failure is not None and grace_deadline is None:
                grace_deadline = time.monotonic() + self._grace
            deadlines = [d for d in (user_deadline, grace_deadline) if d is not None]
            left = None if not deadlines else max(0.0, min(deadlines) - time.monotonic())
            # A process first reports through its pipe (result or traceback), then exits.
            waitables: dict[Any, int] = {}
            for i in pending:
                waitables[self.processes[i].sentinel if self._done[i] else self._conns[i]] = i
            try:
                ready = mpc.wait(list(waitables), timeout=left)
            except BaseException:  # KeyboardInterrupt in the parent: leave no orphans
                self._terminate(pending)
                raise
            if not ready:
                break  # timeout, or the grace after a failure, expired
            for w in ready:
                i = waitables[w]
                if not self._done[i]:
                    self._receive(i)
                    continue
                self.processes[i].join()
                self._check_exit(i)
                pending.discard(i)
        if pending:
            self._terminate(pending)
        for p in self.processes:
            if p.exitcode not in (0, None):
                _remove_segments(p.pid, self._launch_id)
        if pending:
            if self._failure is None:
                raise TimeoutError(f"spawn: ranks {sorted(pending)} did not finish within "
                                   f"{timeout} s (terminated)")
        for c in self._conns:
            c.close()
        if self._failure is not None:
            raise self._failure
        return self._results


def spawn(fn: Callable[..., Any], args: Sequence[Any] = (), nprocs: int = 1, join: bool = True,
          daemon: bool = False, start_method: str = "spawn",
          grace: float = 5.0) -> Any:
    """Run ``fn(rank, *args)`` in ``nprocs`` new processes, like torch.multiprocessing.spawn.

    Each process gets ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``,
    ``MASTER_ADDR`` (127.0.0.1) and ``MASTER_PORT`` (a free port picked for this call) in its
    environment, so ``commfuse.init()`` (env://) joins the group with no arguments.

    Args:
        fn: a picklable (module-level) function ``fn(rank, *args)``.
        args: the remaining arguments of fn (picklable).
        nprocs: number of processes W.
        join: wait for them (True) or return a :class:`SpawnContext` whose ``join()`` waits.
        daemon: make the processes daemonic.
        start_method: ``"spawn"`` (default, like torch), ``"forkserver"`` or ``"fork"``.
            With ``"spawn"`` and ``"forkserver"`` fn's module must be importable, and a script
            must guard its entry point with ``if __name__ == "__main__":``.
        grace: seconds the other processes get to finish after one fails before they are
            terminated.

    Returns:
        With join=True, the list of fn's return values in rank order (torch returns None).

    Raises:
        ProcessRaisedException: fn raised in a process; the message holds its rank and
            traceback, ``.rank`` the rank, ``.exception`` the exception when picklable.
        ProcessExitedException: a process died without raising (signal, os._exit).
    """
    # Checked here, in the caller, naming the argument: a misplaced one (spawn(fn, 2), the
    # count where args goes) failed inside multiprocessing with "'int' object is not iterable".
    if not callable(fn):
        raise TypeError(f"spawn: fn must be callable, got {type(fn).__name__} {fn!r}")
    if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
        raise TypeError(f"spawn: args must be a sequence of fn's arguments after the rank "
                        f"(a tuple), got {type(args).__name__} {args!r}")
    if isinstance(nprocs, bool) or not isinstance(nprocs, numbers.Integral):
        raise TypeError(f"spawn: nprocs must be an int, got {type(nprocs).__name__} {nprocs!r}")
    if nprocs < 1:
        raise ValueError(f"spawn: nprocs is {nprocs} but must be >= 1")
    if isinstance(grace, bool) or not isinstance(grace, numbers.Real) or not grace >= 0:
        raise ValueError(f"spawn: grace must be a number of seconds >= 0, got {grace!r}")
    ctx = mp.get_context(start_method)
    env = {
        "WORLD_SIZE": str(nprocs),
        "LOCAL_WORLD_SIZE": str(nprocs),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        # This call's mark in its ranks' shared-memory segment names: its cleanup removes
        # only theirs, though pids repeat across containers that share /dev/shm.
        "COMMFUSE_LAUNCH_ID": os.urandom(8).hex(),
    }
    processes, conns = [], []
    for rank in range(nprocs):
        reader, writer = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_child, args=(fn, rank, nprocs, tuple(args), env, writer),
                        daemon=daemon, name=f"commfuse-rank-{rank}")
        p.start()
        writer.close()
        processes.append(p)
        conns.append(reader)
    context = SpawnContext(processes, conns, grace, env["COMMFUSE_LAUNCH_ID"])
    return context.join() if join else context

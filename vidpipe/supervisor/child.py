"""One supervised process: ``python -m vidpipe.supervisor.child --config C --shard i/n
[--gpu G]``.

It runs the ordinary daemon (``vidpipe.daemon.run``) on its shard, with its HTTP server on a
free loopback port that only the supervisor uses (the public port is the supervisor's); on a
box of several GPUs, on GPU ``G`` alone (``vidpipe.reload.on_gpu``, kept across reloads). It
reports READY, its port and its status line over ``$NOTIFY_SOCKET``, which the supervisor
points at a socket of its own per child.

Test hook: ``VIDPIPE_TEST_HANG_AT_START=PATH`` makes the one child that creates ``PATH``
(first come) hang before it loads the config, so that the tests can watch the start-up
watchdog dump, kill and restart it. Nothing else reads the variable; never set it in service.
"""

from __future__ import annotations

import signal

# Before anything else: SIGHUP's default action ends a process, and the supervisor forwards
# SIGHUP to every child, including one still importing. Ignored until the daemon installs
# its handler; a child that has not loaded the config yet reads the new one anyway.
signal.signal(signal.SIGHUP, signal.SIG_IGN)

import argparse  # noqa: E402
import ctypes  # noqa: E402
import faulthandler  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from pathlib import Path  # noqa: E402

from vidpipe.supervisor.children import PARENT_ENV  # noqa: E402

HANG_HOOK_ENV = "VIDPIPE_TEST_HANG_AT_START"
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """SIGTERM this process when the supervisor dies (even by SIGKILL): the children run in
    a session of their own (a terminal's Ctrl-C must reach the supervisor only, which stops
    them in order), so nothing else would end them."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not glibc: the supervisor still stops its children
        return
    parent = os.environ.get(PARENT_ENV)
    if parent and str(os.getppid()) != parent:  # it died before prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)


def _hang_for_tests() -> None:
    """The test hook of the module docstring: the first child to create the file hangs."""
    path = os.environ.get(HANG_HOOK_ENV)
    if not path:
        return
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    while True:  # shows in the faulthandler dump as the hanging frame
        time.sleep(1)


class _ShardName(logging.Filter):
    """Puts the shard in front of every record's logger name: the children share one log."""

    def __init__(self, shard: str) -> None:
        super().__init__()
        self.prefix = f"shard{shard}:"

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(self.prefix):
            record.name = self.prefix + record.name
        return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vidpipe.supervisor.child")
    parser.add_argument("--config", required=True)
    parser.add_argument("--shard", required=True, metavar="I/N")
    parser.add_argument("--gpu", type=int, help="the one GPU this process runs on")
    args = parser.parse_args(argv)
    _die_with_parent()
    # the supervisor sends SIGUSR1 to a child that is not ready in time: every thread's stack
    # goes to stderr (the service's log) before the child is killed
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    _hang_for_tests()

    from vidpipe.cli import EXIT_CONFIG, setup_logging, tune_process
    from vidpipe.config import ConfigError, load_config
    from vidpipe.daemon import run
    from vidpipe.shard import parse_shard

    tune_process()
    try:
        shard = parse_shard(args.shard)
        cfg = load_config(args.config)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_CONFIG
    setup_logging(cfg.logging)
    for handler in logging.getLogger().handlers:
        handler.addFilter(_ShardName(str(shard.index)))
    # never the public address: only the supervisor talks to a child, on loopback
    cfg = cfg.model_copy(update={"http": cfg.http.model_copy(update={"host": "127.0.0.1"})})
    return run(cfg, Path(args.config), shard=shard, http_port=0, gpu=args.gpu)


if __name__ == "__main__":
    sys.exit(main())

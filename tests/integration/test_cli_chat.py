"""`tachyon chat` driven through a pseudo-terminal, as a user types: multi-turn history (the second turn's
prompt holds the first exchange and is served from the prefix cache), /system and /clear, Ctrl-C stopping an
answer without ending the program, Ctrl-D and /exit ending it with status 0."""
import os
import pty
import re
import select
import signal
import time

import pytest

from conftest import BIN, SMOL

STATS = re.compile(rb"\[(stopped \| |length \| )?(\d+) prompt tokens \((\d+) cached\), TTFT \d+ ms \| (\d+) tokens")


class Term:
    def __init__(self, *args):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the pty is its controlling terminal, so ^C reaches it as SIGINT
            os.execv(BIN, [BIN, "chat", *args])
        self.buf = b""

    def read_until(self, pattern, timeout=120):
        rx = re.compile(pattern)
        end = time.time() + timeout
        while True:
            m = rx.search(self.buf)
            if m:
                out, self.buf = self.buf[: m.end()], self.buf[m.end():]
                return out, m
            left = end - time.time()
            if left <= 0:
                raise AssertionError("timed out waiting for %r; got %r" % (pattern, self.buf[-2000:]))
            r, _, _ = select.select([self.fd], [], [], left)
            if r:
                try:
                    data = os.read(self.fd, 4096)
                except OSError:
                    data = b""
                if not data:
                    raise AssertionError("the program ended while waiting for %r; got %r" % (pattern, self.buf[-2000:]))
                self.buf += data

    def send(self, text):
        os.write(self.fd, text.encode() if isinstance(text, str) else text)

    def wait(self, timeout=30):
        end = time.time() + timeout
        while time.time() < end:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return status
            try:  # keep draining the terminal so the child never blocks on output
                if select.select([self.fd], [], [], 0.1)[0]:
                    os.read(self.fd, 4096)
            except OSError:
                pass
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        raise AssertionError("tachyon chat did not exit")


@pytest.fixture
def term():
    if not os.path.exists(SMOL):
        pytest.skip("SmolLM2 not present (make models)")
    t = Term("-m", SMOL, "--temp", "0", "-n", "300", "-c", "2048")
    yield t
    try:
        os.kill(t.pid, signal.SIGKILL)
        os.waitpid(t.pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass
    os.close(t.fd)


def test_turns_history_and_exit(term):
    term.read_until(rb"> ")
    term.send("What is the capital of France?\n")
    _, m1 = term.read_until(STATS)
    term.read_until(rb"> ")
    term.send("And of Italy?\n")
    _, m2 = term.read_until(STATS)
    p1, p2, cached2 = int(m1.group(2)), int(m2.group(2)), int(m2.group(3))
    assert p2 > p1 + 5, (p1, p2)  # the second prompt holds the first exchange
    assert cached2 >= p1 - 16, (p1, cached2)  # ...served from the prefix cache (whole blocks of it)
    term.read_until(rb"> ")
    term.send("/clear\n")
    term.read_until(rb"conversation cleared")
    term.read_until(rb"> ")
    term.send("And of Italy?\n")
    _, m3 = term.read_until(STATS)
    assert int(m3.group(2)) < p2  # the history is gone
    term.read_until(rb"> ")
    term.send("/system Answer in one word.\n")
    term.read_until(rb"system message set")
    term.read_until(rb"> ")
    term.send("/exit\n")
    assert os.waitstatus_to_exitcode(term.wait()) == 0


def test_ctrl_c_stops_the_answer_not_the_program(term):
    term.read_until(rb"> ")
    term.send("Write a very long story about a dragon who learns to cook, with many chapters.\n")
    term.read_until(rb"chapters\.\r?\n")  # the terminal's echo of the line
    term.read_until(rb"\w+\W+\w+\W+\w+")  # the answer is streaming
    term.send(b"\x03")
    _, m = term.read_until(STATS)
    assert m.group(1) == b"stopped | ", m.group(0)
    assert int(m.group(4)) < 300
    term.read_until(rb"> ")
    term.send("Thanks!\n")  # the program goes on, with the stopped answer in its history
    _, m2 = term.read_until(STATS)
    assert int(m2.group(3)) > 0
    term.read_until(rb"> ")
    term.send(b"\x04")  # Ctrl-D at the prompt ends it
    assert os.waitstatus_to_exitcode(term.wait()) == 0

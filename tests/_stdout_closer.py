"""A --worker-prefix relay for the crash tests: runs the session runtime, relays its stdout, and on
SIGUSR1 closes its own stdout while staying alive, so the host sees stdout end at a frame boundary
from a process that did not exit (Deno cannot close its own stdout)."""
import os
import signal
import subprocess
import sys
import threading

signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE)


def relay():
    try:
        while True:
            data = os.read(child.stdout.fileno(), 65536)
            if not data:
                break
            os.write(1, data)
    except OSError:
        pass


threading.Thread(target=relay, daemon=True).start()
signal.sigwait([signal.SIGUSR1])
os.close(1)
child.wait()

"""Starts `kern serve` for the GPU serve tests: port 0 (the server picks one and prints it), stderr to
a log, and waits for its "ready on http://...:PORT" line. Returns (process, base URL), or exits 1
naming the log when the server stops before it is ready."""
import subprocess
import sys


def start(kern, args, log):
    srv = subprocess.Popen([kern, "serve", "--port", "0"] + list(args), stdout=subprocess.PIPE, stderr=log, text=True)
    for line in srv.stdout:
        if "ready on http://" in line:
            return srv, f"http://127.0.0.1:{int(line.rsplit(':', 1)[1])}"
    print("kern serve did not start; see", log.name)
    sys.exit(1)


def stop(srv, timeout=60):
    """SIGTERM (the server drains), then its exit status; killed if it does not exit in time."""
    if srv.poll() is None:
        srv.send_signal(15)
        try:
            return srv.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            srv.kill()
    return srv.wait()

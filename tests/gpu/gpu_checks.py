"""What the GPU test scripts (tests/gpu/*/*.py, run by ctest) share: a fresh work directory and a
list of named checks that prints each as it is decided and fails the script at the end."""
import os
import shutil


def fresh_dir(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)


class Checks:
    def __init__(self):
        self.failures = []

    def expect(self, cond, what):
        print(("ok   " if cond else "FAIL ") + what, flush=True)
        if not cond:
            self.failures.append(what)

"""Runs a command and then prints `exit status N` on standard output (its own status is 0), so
that a test can FileCheck the exact status: `%exit-status CMD ARGS 2>&1 | FileCheck %s`.
The command's standard output and error pass through unchanged, before the status line."""

import subprocess
import sys

status = subprocess.call(sys.argv[1:])
sys.stdout.write("exit status %d\n" % status)

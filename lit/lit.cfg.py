# -*- Python -*-
# lit configuration for the Mercury-rs tests: `lit-22 -v lit/` from the repository root, or
# `cargo test -p mercury-opt --test lit` which builds the binaries first.
#
# Substitutions:
#   %mercury-opt   the mercury-opt binary in $MERCURY_BIN_DIR (default: <repo>/target/debug)
#   %mercury-run   the mercury-run binary, when built (tests that need it: REQUIRES: mercury-run)
#   %mercury-tune  the mercury-tune binary, when built (REQUIRES: mercury-tune)
#   %mercury-mgpu, %mercury-gpu-bench, %mercury-study, %mercury-fuzz  the other binaries, when
#                  built (REQUIRES: the binary's name)
#   %exit-status   runs a command and prints `exit status N` after its output (exact statuses)
#   %mlir-opt      upstream mlir-opt 22
#   %repo          the repository root
#   %python        the Python that runs lit
#   FileCheck, not, count, split-file: the LLVM 22 tools
# Features: mercury-run, mercury-tune, ... (the binaries exist), gpu (nvidia-smi lists a GPU).

import os
import shutil
import subprocess
import sys

import lit.formats

config.name = "Mercury"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.excludes = ["Inputs", "Output", "lit.cfg.py"]
config.test_source_root = os.path.dirname(os.path.abspath(__file__))
config.test_exec_root = config.test_source_root

repo = os.path.dirname(config.test_source_root)


def llvm_bin_dir():
    """The unversioned LLVM 22 tools directory, e.g. /usr/lib/llvm-22/bin."""
    for config_tool in ("llvm-config-22", "llvm-config"):
        path = shutil.which(config_tool)
        if not path:
            continue
        try:
            version = subprocess.check_output([path, "--version"], text=True).strip()
            prefix = subprocess.check_output([path, "--prefix"], text=True).strip()
        except (OSError, subprocess.CalledProcessError):
            continue
        if version.split(".")[0] == "22":
            return os.path.join(prefix, "bin")
    return None


LLVM_BIN = llvm_bin_dir()


def find_tool(name):
    """`name-22` on PATH, else `name` in the LLVM 22 bin directory."""
    versioned = shutil.which(name + "-22")
    if versioned:
        return versioned
    if LLVM_BIN and os.path.isfile(os.path.join(LLVM_BIN, name)):
        return os.path.join(LLVM_BIN, name)
    return None


hint = "install LLVM 22 (apt-get install llvm-22-tools mlir-22-tools, or bash scripts/setup.sh)"
tools = {}
for tool in ("FileCheck", "not", "count", "split-file", "mlir-opt"):
    path = find_tool(tool)
    if path is None:
        lit_config.fatal("%s (LLVM 22) not found: %s" % (tool, hint))
    tools[tool] = path

bin_dir = os.environ.get("MERCURY_BIN_DIR", os.path.join(repo, "target", "debug"))
bin_dir = os.path.abspath(os.path.join(repo, bin_dir))
mercury_opt = os.path.join(bin_dir, "mercury-opt")
if not os.path.isfile(mercury_opt):
    lit_config.fatal(
        "mercury-opt not found in %s: run `cargo build -p mercury-opt` or set MERCURY_BIN_DIR" % bin_dir
    )
lit_config.note("mercury-opt: %s" % mercury_opt)
mercury_run = os.path.join(bin_dir, "mercury-run")
mercury_tune = os.path.join(bin_dir, "mercury-tune")

# Tool names only where they stand as a command word (not inside paths or option values).
def tool_pattern(name):
    return r"(?<![\w/.%-])" + name.replace("-", r"\-") + r"(?![\w-])"


config.substitutions.append(("%mercury-opt", mercury_opt))
config.substitutions.append(("%mercury-run", mercury_run))
config.substitutions.append(("%mercury-tune", mercury_tune))
for other in ("mercury-mgpu", "mercury-gpu-bench", "mercury-study", "mercury-fuzz"):
    path = os.path.join(bin_dir, other)
    config.substitutions.append(("%" + other, path))
    if os.path.isfile(path):
        config.available_features.add(other)
config.substitutions.append(
    ("%exit-status", "%s %s" % (sys.executable, os.path.join(config.test_source_root, "Inputs", "exit_status.py")))
)
config.substitutions.append(("%mlir-opt", tools["mlir-opt"]))
config.substitutions.append(("%repo", repo))
config.substitutions.append(("%python", sys.executable))
for tool in ("FileCheck", "not", "count", "split-file"):
    config.substitutions.append((tool_pattern(tool), tools[tool]))

if os.path.isfile(mercury_run):
    config.available_features.add("mercury-run")
if os.path.isfile(mercury_tune):
    config.available_features.add("mercury-tune")
if shutil.which("nvidia-smi"):
    try:
        if subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=30).returncode == 0:
            config.available_features.add("gpu")
    except (OSError, subprocess.SubprocessError):
        pass

# A panic shows its message but no backtrace noise; colours off for FileCheck.
config.environment["RUST_BACKTRACE"] = "0"
config.environment["NO_COLOR"] = "1"
config.environment["TERM"] = "dumb"
for var in ("HOME", "TMPDIR"):
    if var in os.environ:
        config.environment[var] = os.environ[var]

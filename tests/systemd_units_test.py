"""deploy/systemd installed into a root of its own (units, the hardening
drop-in, flag files, the binaries under test at /usr/local/bin): every unit
passes `systemd-analyze verify` without a warning, the offline security
review rates each one well exposed at most, systemd-sysusers creates the
user the units run as, and each ExecStart's flags exist in its binary and
its flag file parses."""

import os
import re
import shutil
import subprocess
import unittest

import cluster_harness as harness

REPO = harness.RUNFILES
SYSTEMD = os.path.join(REPO, "deploy", "systemd")
FLAGS = os.path.join(REPO, "deploy", "k8s", "base", "flags")
ROOT = os.path.join(harness.TMP, "root")
UNITS = {
    "corescape-scheduler.service": harness.SCHEDULER,
    "corescape-worker.service": harness.WORKER,
    "corescape-worker@.service": harness.WORKER,
    "corescape-attention-server.service": harness.ATTENTION_SERVER,
}


def instance(unit):
    """What systemd runs of `unit`: a template as its instance for GPU 0."""
    return unit.replace("@.", "@0.")
# systemd-analyze security's scale, x10: 2.5 is well inside "OK" (< 4.0).
EXPOSURE_THRESHOLD = 25
DROP_IN_DIR = "corescape-.service.d"


def unit_settings(path):
    """[Service] settings as {key: [values]}, continuation lines joined."""
    with open(path) as f:
        text = f.read().replace("\\\n", " ")
    settings = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "[")) and "=" in line:
            key, value = line.split("=", 1)
            settings.setdefault(key, []).append(value)
    return settings


def run(argv, **kwargs):
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, **kwargs)


class SystemdUnitsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        shutil.rmtree(ROOT, ignore_errors=True)
        units_dir = os.path.join(ROOT, "etc", "systemd", "system")
        os.makedirs(units_dir)
        for unit in UNITS:
            shutil.copy(os.path.join(SYSTEMD, unit), units_dir)
        shutil.copytree(os.path.join(SYSTEMD, DROP_IN_DIR), os.path.join(units_dir, DROP_IN_DIR))
        # The targets and slices every unit depends on, from this machine.
        shutil.copytree("/lib/systemd/system", os.path.join(ROOT, "usr", "lib", "systemd", "system"),
                        symlinks=True)
        os.makedirs(os.path.join(ROOT, "usr", "local", "bin"))
        for binary in UNITS.values():
            shutil.copy(binary, os.path.join(ROOT, "usr", "local", "bin"))
        shutil.copytree(FLAGS, os.path.join(ROOT, "etc", "corescape", "flags"))
        shutil.copy(os.path.join(SYSTEMD, "corescape.env"), os.path.join(ROOT, "etc", "corescape"))

    def test_verify_passes_without_warnings(self):
        result = run(["systemd-analyze", "verify", f"--root={ROOT}", *map(instance, UNITS)])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout + result.stderr, "")
        # The drop-in is read: a bad line in it is reported.
        bad = os.path.join(ROOT, "etc", "systemd", "system", DROP_IN_DIR, "zz-bad.conf")
        with open(bad, "w") as f:
            f.write("[Service]\nProtectSystem=sometimes\n")
        try:
            result = run(["systemd-analyze", "verify", f"--root={ROOT}",
                          "corescape-worker.service"])
            self.assertIn("zz-bad.conf", result.stdout + result.stderr)
        finally:
            os.unlink(bad)

    def test_every_unit_is_hardened(self):
        for unit in UNITS:
            result = run(["systemd-analyze", "security", "--offline=true", f"--root={ROOT}",
                          f"--threshold={EXPOSURE_THRESHOLD}", instance(unit)])
            exposure = re.search(r"Overall exposure level for \S+: ([0-9.]+)", result.stdout)
            self.assertIsNotNone(exposure, result.stdout + result.stderr)
            self.assertEqual(result.returncode, 0,
                             f"{unit}: exposure {exposure.group(1)}\n{result.stdout}")
            for setting in ("NoNewPrivileges=", "ProtectSystem=", "ProtectHome=",
                            "PrivateTmp=", "RestrictAddressFamilies=~AF_PACKET",
                            "RestrictAddressFamilies=~…", "CapabilityBoundingSet=~CAP_SYS_ADMIN"):
                line = next(l for l in result.stdout.splitlines() if f" {setting} " in l)
                self.assertTrue(line.startswith("✓"), f"{unit}: {line}")
            self.assertIn("strict read-only access", result.stdout, unit)

    def test_notify_watchdog_user_and_state_directory(self):
        with open(os.path.join(SYSTEMD, "corescape.sysusers.conf")) as f:
            user = next(line.split()[1] for line in f if line.startswith("u "))
        for unit in UNITS:
            settings = unit_settings(os.path.join(SYSTEMD, unit))
            self.assertEqual(settings["Type"], ["notify"], unit)
            self.assertEqual(settings["NotifyAccess"], ["main"], unit)
            self.assertIn("WatchdogSec", settings, unit)
            self.assertEqual(settings["User"], [user], unit)
            self.assertTrue(settings["StateDirectory"][0].startswith("corescape/"), unit)
        # Each GPU's worker is a node of its own: its own name, state and device.
        gpu = unit_settings(os.path.join(SYSTEMD, "corescape-worker@.service"))
        self.assertEqual(gpu["StateDirectory"], ["corescape/worker-gpu%i"])
        for flag in ("--name=%H-gpu%i", "--device=cuda:%i", "--listen=0.0.0.0:0", "--data_port=0"):
            self.assertIn(flag, gpu["ExecStart"][0].split())
        # The scheduler's state goes where systemd made its state directory.
        scheduler = unit_settings(os.path.join(SYSTEMD, "corescape-scheduler.service"))
        self.assertIn(f"--state_dir=%S/{scheduler['StateDirectory'][0]}",
                      scheduler["ExecStart"][0].split())

    def test_sysusers_creates_the_user(self):
        result = run(["systemd-sysusers", f"--root={ROOT}",
                      os.path.join(SYSTEMD, "corescape.sysusers.conf")])
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(os.path.join(ROOT, "etc", "passwd")) as f:
            self.assertRegex(f.read(), r"(?m)^corescape:x:\d+:\d+:")

    def test_exec_start_flags_exist_and_flag_files_parse(self):
        for unit, binary in UNITS.items():
            argv = unit_settings(os.path.join(SYSTEMD, unit))["ExecStart"][0].split()
            self.assertEqual(argv[0], f"/usr/local/bin/{os.path.basename(binary)}")
            help_text = run([binary, "--helpfull"])
            known = set(re.findall(r"^\s+--([a-z_0-9]+) ", help_text.stdout + help_text.stderr,
                                   re.M))
            for arg in argv[1:]:
                self.assertIn(arg[2:].split("=")[0], known, f"{unit}: {arg}")
            flagfile = next(a.split("=", 1)[1] for a in argv if a.startswith("--flagfile="))
            installed = os.path.join(ROOT, flagfile.lstrip("/"))
            self.assertTrue(os.path.exists(installed), f"{unit}: {flagfile}")
            # absl reads the file before --version: an unknown flag fails here.
            result = run([binary, f"--flagfile={installed}", "--version"])
            self.assertEqual(result.returncode, 0, f"{unit}: {result.stderr}")


if __name__ == "__main__":
    unittest.main(verbosity=2)

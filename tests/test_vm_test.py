"""The VM test's pure parts: where the guest comes from, what its console says, how it is judged."""

import json
import os
import sys

from helpers import ROOT

sys.path.insert(0, os.path.join(ROOT, "scripts"))
import vm_test  # noqa: E402

GOOD = {"facts": {"kernel": "6.1.0-40-amd64", "openvswitch_module": True, "netem": True},
        "demo_memory": {"ok": True, "runs": 2},
        "net": {"rc": 0, "json": {"datapath": "kernel", "fidelity_min": 0.97, "verdict": "faithful"}},
        "run": {"rc": 0, "json": {"datapath": "kernel", "fidelity": {"verdict": "faithful"}}},
        "dctcp": {"rc": 0, "json": {"incast": {"throughput_of_rate": 0.95, "queue": {
            "median_packets": 21, "p90_packets": 24, "p90_of_buffer": 0.24, "buffer_packets": 100, "ecn_marks": 900}}}},
        "cubic": {"rc": 0, "json": {"incast": {"throughput_of_rate": 0.97, "queue": {
            "median_packets": 90, "p90_packets": 99, "p90_of_buffer": 0.99, "buffer_packets": 100, "ecn_marks": 0}}}},
        "done": {}}


def console_of(steps: dict) -> str:
    """A console as the guest writes it: kernel and systemd lines around the marked ones."""
    lines = ["[    0.000000] Linux version 6.1.0-40-amd64", "[  OK  ] Started Open vSwitch."]
    for step, fields in steps.items():
        lines.append(f"[   42.1] {vm_test.MARK} {json.dumps({'step': step, **fields})}")
    return "\r\n".join(lines + ["[  101.2] reboot: Power down"])


def test_the_guest_comes_from_this_machines_debian_archive_in_either_sources_format(tmp_path):
    d = tmp_path / "deb822"
    (d / "sources.list.d").mkdir(parents=True)
    (d / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n\n"
        "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\nComponents: main\n")
    assert vm_test.debian_mirror(str(d)) == "http://mirror.example/debian"
    old = tmp_path / "oneline"
    (old / "sources.list.d").mkdir(parents=True)
    (old / "sources.list").write_text("# comment\ndeb http://sec.example/ bookworm-security main\n"
                                      "deb [arch=amd64] http://skip.example/ x main\ndeb http://old.example/debian bookworm main\n")
    assert vm_test.debian_mirror(str(old)) == "http://old.example/debian"


def test_a_guest_that_met_every_check_passes_and_its_console_is_read_back():
    steps = vm_test.parse_console(console_of(GOOD))
    assert steps == GOOD
    assert vm_test.judge(steps) == []


def test_each_failure_of_the_guest_is_named():
    bad = json.loads(json.dumps(GOOD))
    bad["net"]["json"].update(datapath="user", fidelity_min=0.5, verdict="not faithful")
    bad["run"]["rc"] = 1
    bad["demo_memory"] = {"ok": False, "error": "this run needs about 5.4 GiB"}
    del bad["done"]
    problems = vm_test.judge(vm_test.parse_console(console_of(bad)))
    assert any("did not finish" in p for p in problems)
    assert any("user datapath" in p for p in problems)
    assert any("fidelity_min 0.5" in p for p in problems)
    assert any("run exited 1" in p for p in problems)
    assert any("5.4 GiB" in p for p in problems)
    assert any("demo exited None" in p for p in vm_test.judge(vm_test.parse_console(console_of(GOOD)), demo=True))


def test_the_guest_gets_the_vagrant_vms_memory_and_a_changed_setup_rebuilds_its_base(tmp_path, monkeypatch):
    vagrantfile = open(os.path.join(ROOT, "vagrant", "Vagrantfile")).read()
    assert f"memory = {vm_test.VAGRANT_MEMORY_MIB}" in vagrantfile
    (tmp_path / "scripts").mkdir()
    for name in ("scripts/setup.sh", "requirements.txt", "setup.py"):
        (tmp_path / name).write_text(open(os.path.join(ROOT, name)).read())
    monkeypatch.setattr(vm_test, "ROOT", str(tmp_path))
    before = vm_test.base_key()
    (tmp_path / "requirements.txt").write_text("numpy==2.4.6\n")
    assert vm_test.base_key() != before


def test_the_dctcp_experiment_is_judged_on_dctcps_queue_and_rate_and_cubics_fill():
    bad = json.loads(json.dumps(GOOD))
    bad["dctcp"]["json"]["incast"]["queue"].update(median_packets=60, ecn_marks=0)
    bad["dctcp"]["json"]["incast"]["throughput_of_rate"] = 0.7
    bad["cubic"]["json"]["incast"]["queue"].update(p90_packets=50, p90_of_buffer=0.5)
    problems = vm_test.judge(vm_test.parse_console(console_of(bad)))
    assert any("queue median 60 packets is outside [15, 30]" in p for p in problems)
    assert any("throughput 70% of the rate is below 90%" in p for p in problems)
    assert any("marked no packet" in p for p in problems)
    assert any("cubic's queue p90 50 is below 0.8 of the 100-packet buffer" in p for p in problems)
    del bad["cubic"]
    assert any("cubic incast exited None" in p for p in vm_test.judge(bad))


def test_an_incast_only_guest_is_judged_on_the_dctcp_experiment_alone():
    steps = {k: v for k, v in vm_test.parse_console(console_of(GOOD)).items() if k in ("dctcp", "cubic", "done")}
    assert vm_test.judge(steps, incast_only=True) == []
    assert any("net --check exited None" in p for p in vm_test.judge(steps))


def test_the_guest_runs_lab_1_and_a_training_lab_and_each_is_judged():
    assert "lab1-topologies" in vm_test.VM_LABS and "lab5-latency" in vm_test.VM_LABS
    passed = {"failed_command": None, "checker_passes": True, "checker_rejects_tampering": True,
              "answers_pass": True, "wrong_answer_rejected": True, "graded_answers": 5}
    labs = list(vm_test.VM_LABS)
    good = dict(GOOD, labs={"rc": 0, "json": {"ok": True, "labs": [dict(passed, lab=n) for n in labs]}})
    steps = vm_test.parse_console(console_of(good))
    assert vm_test.judge(steps, labs=labs) == []
    failed = dict(GOOD, labs={"rc": 1, "json": {"ok": False, "labs": [
        dict(passed, lab=labs[0]), dict(passed, lab=labs[1], failed_command="dmlbed run ...", error="boom")]}})
    problems = vm_test.judge(vm_test.parse_console(console_of(failed)), labs=labs)
    assert problems == [f"{labs[1]}: `dmlbed run ...` failed: boom"]
    assert any("did not run in the guest" in p for p in vm_test.judge(vm_test.parse_console(console_of(GOOD)),
                                                                     labs=labs))

"""One grammar of units: every time and size option takes a plain number in its own unit or a number with a unit, on
the command line and in compare configs, and a bad one is refused in one line naming what is valid."""

import json

import pytest

from emulation.core.units import BYTES, MEBIBYTES, MICROSECONDS, MILLISECONDS, SECONDS
from emulation.run.options import OptionError, coerce, from_mapping, option_of
from helpers import run_dmlbed


def flag(name):
    from emulation.run.options import flag_label
    return flag_label(name)


@pytest.mark.parametrize("quantity,text,value", [
    (SECONDS, "5ms", 0.005), (SECONDS, "200us", 0.0002), (SECONDS, "2", 2.0), (SECONDS, "2min", 120.0),
    (MILLISECONDS, "0.2s", 200.0), (MILLISECONDS, "250", 250.0), (MICROSECONDS, "1ms", 1000.0),
    (BYTES, "16K", 16000.0), (BYTES, "16KiB", 16384.0), (BYTES, "4M", 4e6), (BYTES, "1GiB", 2.0 ** 30),
    (MEBIBYTES, "25MiB", 25.0), (MEBIBYTES, "25MB", 25e6 / 2 ** 20), (MEBIBYTES, "512KiB", 0.5)])
def test_a_quantity_reads_its_units_without_case(quantity, text, value):
    assert quantity.parse(text) == pytest.approx(value, rel=1e-12)
    assert quantity.parse(text.upper()) == pytest.approx(value, rel=1e-12)


@pytest.mark.parametrize("quantity,text", [(SECONDS, "5xs"), (SECONDS, "16K"), (BYTES, "5ms"), (BYTES, "K"),
                                           (MILLISECONDS, "")])
def test_a_quantity_refuses_a_unit_of_another_kind(quantity, text):
    with pytest.raises(ValueError):
        quantity.parse(text)


@pytest.mark.parametrize("name,text,stored,parsed", [
    ("rto_min", "200ms", "200ms", 200), ("rto_min", "0.2s", "0.2s", 200), ("tsq", "16K", "16K", 16000),
    ("tsq", "16KiB", "16KiB", 16384), ("bucket_mb", "25MB", 25e6 / 2 ** 20, None), ("bucket_mb", "25", 25.0, None),
    ("socket_buffer", "4M", 4000000, None), ("mtu", "3.5K", 3500, None), ("timeout", "2min", 120.0, None),
    ("latency_us", "1ms", 1000.0, None), ("tg_latency_us", "5us", 5.0, None), ("alpha", "5ms", 0.005, None)])
def test_time_and_size_options_take_units(name, text, stored, parsed):
    value = coerce({name: text}, flag)[name]
    assert value == pytest.approx(stored) if not isinstance(stored, str) else value == stored
    if parsed is not None:
        assert option_of(name).parse(value) == parsed


@pytest.mark.parametrize("name,text,message", [
    ("timeout", "5xs", "--timeout must be a number of seconds or one with a unit (5ms, 200us, 1s), not '5xs'"),
    ("socket_buffer", "1.5", "--socket-buffer 1.5 is not a whole number of bytes"),
    ("bucket_mb", "25ms", "--bucket must be a number of MiB or one with a unit (16K, 25MB, 4MiB)")])
def test_a_bad_unit_names_what_is_valid(name, text, message):
    with pytest.raises(OptionError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        coerce({name: text}, flag)


def test_an_rto_min_between_whole_milliseconds_is_refused():
    with pytest.raises(ValueError, match="whole number of ms in"):
        option_of("rto_min").parse("1.5ms")


def test_a_compare_config_takes_units_as_strings():
    cfg = from_mapping({"topo": "star:4", "algo": "ring", "rto_min": "200ms", "bucket_mb": "25MiB", "tsq": "16K",
                        "socket_buffer": "4MiB", "timeout": "90s"}, "row 1")
    assert (cfg.bucket_mb, cfg.socket_buffer, cfg.timeout) == (25.0, 4 << 20, 90.0)
    with pytest.raises(OptionError, match="^row 1: timeout must be a number of seconds"):
        from_mapping({"topo": "star:4", "algo": "ring", "timeout": "fast"}, "row 1")


def test_theory_takes_alpha_with_a_unit_and_rates_beyond_the_shaper():
    with_unit = run_dmlbed("theory", "--topo", "tree:4,2", "--bw", "100Gbit,10Gbit", "--algo", "blueconnect",
                           "--model", "resnet50", "--alpha", "5ms", "--json")
    plain = run_dmlbed("theory", "--topo", "tree:4,2", "--bw", "100000,10000", "--algo", "blueconnect",
                       "--model", "resnet50", "--alpha", "0.005", "--json")
    assert with_unit.returncode == 0 and plain.returncode == 0, with_unit.stderr + plain.stderr
    a, b = json.loads(with_unit.stdout), json.loads(plain.stdout)
    assert a["gst_theory_s"] == b["gst_theory_s"] and a["baselines_s"] == b["baselines_s"]
    bad = run_dmlbed("simulate", "--topo", "star:4", "--algo", "ring", "--latency", "5xs")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "dmlbed: error: --latency must be a number of microseconds or one with a unit (5ms, 200us, 1s), not '5xs'"]


@pytest.mark.parametrize("old, new, value", [("--latency-us", "--latency", "5"), ("--bucket-mb", "--bucket", "25MB"),
                                             ("--tg-latency-us", "--tg-latency", "5ms"), ("--tg-step-s", "--tg-step", "1")])
def test_a_flags_old_spelling_is_still_taken_and_says_so(old, new, value):
    from emulation.commands.cli import build_parser
    parser = build_parser()
    command = "simulate" if new in ("--latency", "--bucket") else "theory"
    args = ["--topo", "star:4", "--algo", "ring"]
    with_new = parser.parse_args([command, *args, new, value])
    import contextlib
    import io
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        with_old = parser.parse_args([command, *args, old, value])
    assert vars(with_new) == vars(with_old)
    assert err.getvalue().strip() == f"dmlbed: note: {old} is the old spelling of {new} (it takes units: see --help)"
    help_text = parser._subparsers._group_actions[0].choices[command].format_help()
    assert f"formerly {old}, still taken" in " ".join(help_text.split())

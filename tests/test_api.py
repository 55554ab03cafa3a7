"""The Python API's functions show the option table's keys as typed keyword parameters (help(), IDEs) and take
exactly those; a Network's hosts as Mininet's (the emulated part is in test_link_events.py)."""

import inspect
import pydoc

import pytest

import dmlbed
from emulation.run.options import MATRIX, described, yaml_key


def keys():
    return {yaml_key(n, o): (o, d) for n, o, d in described() if o.yaml and o.group != MATRIX}


@pytest.mark.parametrize("function", [dmlbed.run, dmlbed.simulate, dmlbed.theory, dmlbed.jobs],
                         ids=lambda f: f.__name__)
def test_the_functions_show_typed_parameters_from_the_option_table(function):
    params = inspect.signature(function).parameters
    for key, (opt, default) in keys().items():
        assert params[key].kind is inspect.Parameter.KEYWORD_ONLY and params[key].default == default, key
    assert params["iters"].annotation is int and params["bw"].annotation is str
    assert params["overlap"].annotation is bool and params["dilation"].annotation is float
    assert "iters: int = 10" in pydoc.render_doc(function)


def test_the_keywords_shown_are_the_keywords_taken():
    answer = dmlbed.theory(topo="bcube:3,1", algo="bml", model="resnet50", bw="1Gbit", iters=3, batch=16)
    assert answer["gst_theory_s"] > 0
    with pytest.raises(ValueError, match="^dmlbed.theory: unknown key 'iterations'"):
        dmlbed.theory(topo="bcube:3,1", algo="bml", iterations=3)


def test_a_network_names_its_hosts_as_mininet_does_before_it_is_up():
    net = dmlbed.Network("bcube:2,2", bw=100)  # nothing is brought up before `with`
    assert net.hosts == ["h0", "h1", "h2", "h3"] and repr(net.host("h1")) == "<Host h1>"
    assert net.host("h1").IP(1) == net.addresses("h1")["L1"]
    with pytest.raises(ValueError, match="no host 'h9': valid are h0, h1, h2, h3"):
        net.host("h9")


def test_bench_calibrate_and_reproduce_are_functions_with_their_commands_flags():
    for function in (dmlbed.bench, dmlbed.calibrate, dmlbed.reproduce):
        assert function.__name__ in dmlbed.__all__ and function.__doc__.startswith(f"`dmlbed {function.__name__}`")
    assert {"op", "sizes", "reps", "mode", "topo", "bw"} <= set(inspect.signature(dmlbed.bench).parameters)
    report = dmlbed.bench(topo="star:8", op="allgather", sizes="1M:4M:x4", mode="simulate")
    assert report["mode"] == "simulate" and report["ops"] == ["allgather"]
    assert "bml-fig5" in dmlbed.reproduce(list=True)["list"]
    with pytest.raises(ValueError, match="^dmlbed.bench: unknown key 'ops': valid are algo, "):
        dmlbed.bench(topo="star:8", ops="allgather")
    with pytest.raises(ValueError, match="^--op 'nope' is invalid"):
        dmlbed.bench(topo="star:8", op="nope", mode="simulate")

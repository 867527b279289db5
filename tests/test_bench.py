"""The benchmark suite runs, and every peer it times computes what datamove computes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from datamove.benchmarks import suite as bench


def small(case):
    """The case with the batch cut to its minimum, so the check stays fast."""
    multiple = int(np.prod(case.args[0])) if case.op == "batch_to_space" else 1
    return case._replace(shape=(multiple,) + case.shape[1:])


CASES = [small(c) for c in bench.suite("quick")]


def make(case):
    logical = np.random.default_rng(1).integers(0, 255, size=case.shape, dtype=np.uint8).astype(case.dtype)
    return bench._in_layout(logical, case.layout)


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_numpy_idiom_computes_the_same(case):
    data = make(case)
    expected = bench._call(case, data, None, "numpy")
    assert np.array_equal(bench._numpy_idiom(case, np.ascontiguousarray(data))(), expected)
    out = bench._empty(expected.shape, data.dtype, case.layout)
    assert np.array_equal(bench._call(case, data, out, "auto"), expected)


@pytest.mark.parametrize("peer", ["torch", "onnxruntime", "openvino"])
def test_peers_compute_the_same(peer):
    pytest.importorskip({"torch": "torch", "onnxruntime": "onnxruntime", "openvino": "openvino"}[peer])
    compared = 0
    for case in CASES:
        data = make(case)
        expected = bench._call(case, data, None, "numpy")
        out = np.zeros(expected.shape, data.dtype)
        if peer == "torch":
            function = bench._torch(case, np.ascontiguousarray(data), 1)
        elif peer == "onnxruntime":
            function = bench._onnxruntime(case, data, out, 1)
        else:
            function = bench._openvino(case, data, out, 1)
        if function is None:
            continue
        result = function()
        got = result.numpy() if peer == "torch" else out
        if peer == "openvino" and case.op == "space_to_batch":
            continue  # OpenVINO's CPU SpaceToBatch is wrong on some cases (see tests/test_openvino.py)
        assert np.array_equal(got, expected), case.label
        compared += 1
    assert compared >= 2


def test_run_writes_a_table_and_json(tmp_path, capsys):
    path = tmp_path / "bench.json"
    assert bench.main(["--quick", "--only", "[4,4,16,16]", "--peers", "numpy idiom", "--json", str(path), "--budget", "0.01"]) == 0
    report = json.loads(path.read_text())
    assert report["rows"] and report["threads"] >= 1
    for row in report["rows"]:
        assert row["floor_s"] > 0 and row["datamove"] > 0 and row["numpy idiom"] > 0
    printed = capsys.readouterr()
    assert "| case |" in printed.out and "[1/" in printed.err


def test_process_measurements_run_and_report_positive_times():
    from datamove.benchmarks import process as bench_process

    case = bench.Case("s2d", "space_to_depth", (4, 16, 64, 64), "float32", ("blocks_first", 2))  # 1 MiB: the core
    times = bench_process.first_call(case)
    assert times["first_s"] > 0 and times["steady_s"] > 0
    # the core's runs are timed inside the calls
    assert 0 < times["first_core_s"] < times["first_s"] and 0 < times["steady_core_s"] < times["steady_s"]
    assert 0 < bench_process._import_cost(1) < 5  # seconds: parsed from -X importtime, not a timing assertion
    shapes = bench_process.new_shapes(count=3)  # the child checks each result against the idiom's
    assert set(shapes) == {"space_to_depth", "depth_to_space", "batch_to_space", "space_to_batch"}
    assert all(v["datamove_s"] > 0 and v["idiom_s"] > 0 for v in shapes.values())


def test_large_cases_are_offered_and_labelled():
    labels = [c.label for c in bench.suite("full", large=True)]
    assert any("1 GiB" in label for label in labels) and any("512 MiB" in label for label in labels)
    assert not any("GiB" in c.label for c in bench.suite("full"))
    assert sum("short" in label for label in labels) >= 7  # channels innermost: every op, crops and pads


def test_survey_of_small_images_runs_and_sums_up(tmp_path, capsys):
    """--survey: the small-image grid instead of the suite (every case a valid call), and the spread of its ratios."""
    import datamove as dm

    cases = bench.survey("quick")
    assert len(cases) == 168 and all(c.label.startswith("survey") for c in cases)
    assert {c.op for c in cases} == {"space_to_depth", "depth_to_space", "space_to_batch", "batch_to_space"}
    assert {c.layout for c in cases} == {"nchw", "nhwc"}
    for case in cases:  # shapes the ops accept, about 1 MiB each
        assert getattr(dm.shapes, case.op)(case.shape, *case.args)
        assert (1 << 17) < case.nbytes <= 1 << 20, case.label
    path = tmp_path / "survey.json"
    assert bench.main(["--survey", "--quick", "--only", "survey b2s [81,64,7,7]", "--peers", "", "--json", str(path),
                       "--budget", "0.005"]) == 0
    report = json.loads(path.read_text())
    spread = report["summary"]
    assert spread["cases"] == len(report["rows"]) == 2  # NCHW and NHWC
    assert spread["worst"] == max(row["datamove"] for row in report["rows"]) > 0
    assert spread["worst_case"] in {row["case"] for row in report["rows"]}
    assert "2 cases: median" in capsys.readouterr().out
    with pytest.raises(SystemExit):  # nothing to run is a usage error, not an empty report
        bench.main(["--survey", "--quick", "--only", "no such case", "--json", str(path)])


def test_large_cases_are_timed_from_memory_and_the_eviction_is_not_timed(monkeypatch):
    """From EVICT_BYTES a case's timed calls each follow a read of twice the last-level cache (untimed, and
    outside the timer's budget); smaller cases are timed warm, back to back."""
    assert bench.evictor(bench.EVICT_BYTES - 1) is None
    from datamove.engines.native import engine as native_engine

    class Core:  # a last-level cache of 64 KiB: a small buffer
        @staticmethod
        def cache_bytes():
            return 1 << 16

    monkeypatch.setattr(native_engine, "core", lambda: Core)
    evict = bench.evictor(bench.EVICT_BYTES)
    assert evict is not None
    evict()
    calls = []
    timer = bench.Timer(budget=0.01, repeats=3)
    times = timer.medians({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")},
                          before=lambda: (calls.append("evict"), __import__("time").sleep(0.02)))
    assert set(times) == {"a", "b"} and all(t < 0.015 for t in times.values())  # the sleep is before()'s alone
    timed = calls[2:]  # (after the warm-up calls)
    assert timed[:4] == ["evict", "a", "evict", "b"] and timed.count("evict") == timed.count("a") + timed.count("b")

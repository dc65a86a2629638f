"""Runtime(progress=...): the load-progress reports of
lms_runtime_create_with_progress, as a Python caller sees them."""
import os
import threading

import pytest
from conftest import DEFAULT_MODEL, EOS, VOCAB

import lmstream
from lmstream.errors import InvalidType, ModelError

MODEL = os.environ.get("LMSTREAM_MODEL", DEFAULT_MODEL)


def recorder():
    calls = []

    def progress(stage, fraction):
        calls.append((stage, fraction, threading.get_ident()))
    return calls, progress


def test_replay_reports_only_ready():
    calls, progress = recorder()
    with lmstream.Runtime.replay(vocab=VOCAB, eos_id=EOS, progress=progress) as rt:
        assert [(s, f) for s, f, _ in calls] == [("ready", 1.0)]
        # The runtime works like one made without progress.
        text = "".join(c.text for c in rt.generate(prompt="", script=[[2, 3], [EOS]]))
        assert text == "He"


def test_model_stages_in_order_on_the_calling_thread():
    if not os.path.exists(MODEL):
        pytest.skip(f"model {MODEL} absent (run `make model`)")
    calls, progress = recorder()
    with lmstream.Runtime(model_path=MODEL, progress=progress):
        pass
    stages = [s for s, _, _ in calls]
    fractions = [f for _, f, _ in calls]
    # Calibration is measured once per model and machine, kept on disk: an
    # earlier test or run may have done it, and then it is not reported.
    distinct = [s for i, s in enumerate(stages) if i == 0 or stages[i - 1] != s]
    assert distinct in (["open", "weights", "speculation", "calibration", "ready"],
                        ["open", "weights", "speculation", "ready"])
    assert fractions[0] == 0.0 and fractions[-1] == 1.0
    assert fractions == sorted(fractions)
    assert {t for _, _, t in calls} == {threading.get_ident()}


def test_calibration_reports_grow_to_its_end():
    """A budget-calibrating load of a model this process has not measured
    (another thread count; no curve kept on disk: curve_cache_dir "")
    reports calibration as it goes."""
    if not os.path.exists(MODEL):
        pytest.skip(f"model {MODEL} absent (run `make model`)")
    calls, progress = recorder()
    with lmstream.Runtime(model_path=MODEL, threads=3, curve_cache_dir="", progress=progress):
        pass
    cal = [f for s, f, _ in calls if s == "calibration"]
    assert len(cal) > 10, calls
    assert cal == sorted(cal) and 0.3 < cal[0] < cal[-1] <= 0.99


def test_failed_load_reports_no_ready():
    calls, progress = recorder()
    with pytest.raises(ModelError, match="no-such-model"):
        lmstream.Runtime(model_path="/nonexistent/no-such-model.gguf", progress=progress)
    assert "ready" not in [s for s, _, _ in calls]


class Stop(Exception):
    pass


def test_exception_in_progress_propagates_and_stops_reports():
    calls = []

    def progress(stage, fraction):
        calls.append(stage)
        raise Stop(stage)
    with pytest.raises(Stop, match="ready"):
        lmstream.Runtime.replay(vocab=VOCAB, eos_id=EOS, progress=progress)
    assert calls == ["ready"]
    if os.path.exists(MODEL):
        calls.clear()
        with pytest.raises(Stop, match="open"):
            lmstream.Runtime(model_path=MODEL, progress=progress)
        assert calls == ["open"]  # nothing after the handler asked to stop
    # The library is still usable afterwards.
    with lmstream.Runtime.replay(vocab=VOCAB, eos_id=EOS) as rt:
        assert rt.stats()["max_slots"] >= 1


def test_progress_must_be_callable():
    with pytest.raises(InvalidType, match="progress must be callable"):
        lmstream.Runtime.replay(vocab=VOCAB, eos_id=EOS, progress="yes")


def test_weights_stage_moves_while_packing():
    """The weights are packed tensor by tensor, and each one is reported:
    a progress bar moves through the weights stage instead of jumping."""
    if not os.path.exists(MODEL):
        pytest.skip(f"model {MODEL} absent (run `make model`)")
    calls, progress = recorder()
    with lmstream.Runtime(model_path=MODEL, spec_budget=8, progress=progress):
        pass
    weights = [f for s, f, _ in calls if s == "weights"]
    assert len(weights) > 10, calls
    assert weights == sorted(weights) and weights[-1] <= 0.3 < [f for s, f, _ in calls][-1]

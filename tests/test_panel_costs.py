"""Every panel at its most expensive accepted values stays under the cost bound ARCHITECTURE.md states (issue 19):
a panel that only computes renders any accepted value within ARITHMETIC_S seconds and ARITHMETIC_MIB MiB; one click
of a measuring panel (a run button, or a value 3.3's prefill and batch panels have not measured yet) within
MEASURING_S and MEASURING_MIB: added to the largest kernel a chapter's default run leaves (3.3, about 0.8 GiB
resident), one measurement stays within the 1.5 GiB a 2 GiB pod leaves the kernel. Values past the bound are
refused before anything runs. Each case sets every control to its costliest accepted value at once (sliders at their
maximum, text boxes at the longest accepted input) and checks the value was accepted (the panel is not greyed out).
These are bounds on runaway cost (minutes, gigabytes), not speed targets: those live in ``python -m kvlab.bench``."""
import time

import pytest

import peak_memory
from kvlab import load_demo_model
from kvlab.costs import decode_cost
from kvlab.lessons import decode, memory_estimate, misconceptions, paged, prefill_decode, storage
from test_lesson_prefill_decode import ROOFS, fake_sweep

ARITHMETIC_S, ARITHMETIC_MIB = 10.0, 300  # kept in step with ARCHITECTURE.md, "What a control value may cost"
MEASURING_S, MEASURING_MIB = 300.0, 512
MEASURES_ON_CHANGE = ("3.3 prefill", "3.3 batch")  # no run button: a length not measured yet is measured when chosen

pytestmark = pytest.mark.slow


_SAMPLER: dict = {}
exec(peak_memory._SAMPLER, _SAMPLER)  # the same RssAnon sampler, run in this process: peak_during(work)


def cost(work) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of this process, peak anonymous memory above the start in bytes) of ``work()``,
    memory sampled every millisecond. The bound is checked on CPU time: on a machine shared with other programs the
    wall time stretches with their load, the work this process does does not (two cores: twice the wall bound)."""
    t0, c0 = time.perf_counter(), time.process_time()
    peak = _SAMPLER["peak_during"](work)
    return time.perf_counter() - t0, time.process_time() - c0, peak


@pytest.fixture(scope="module")
def demo():
    return load_demo_model()


def _slider_max(panel, name):
    c = panel.controls[name]
    options = getattr(c, "options", None)
    if options:  # a selection slider or dropdown: its last option
        last = options[-1]
        return last[1] if isinstance(last, tuple) else last
    return c.max


def _max_all(panel, text=None, skip=()):
    values = {n: _slider_max(panel, n) for n, c in panel.controls.items()
              if n not in skip and (hasattr(c, "max") or getattr(c, "options", None))}
    return {**values, **(text or {})}


def chapter_batch() -> prefill_decode.BatchSweep:
    """A batch sweep as 3.3 measures it (every batch size, on the roofline model), with made-up times: the panel's
    costliest move measures B = 1 … 32 at the longest context it accepts."""
    c, steps = prefill_decode.ROOFLINE_CONFIG, prefill_decode.BATCH_STEPS
    points = [prefill_decode.BatchPoint(B, 0.01, decode_cost(c, 8, steps, B), steps)
              for B in prefill_decode.BATCH_SIZES]
    return prefill_decode.BatchSweep(points, 8, c, "cpu（测试）")


def _cases(demo):
    model, tok = demo
    yield "3.1 latency", lambda: decode.latency_panel(decode.timing_model(), new_tokens=32), \
        {"new_tokens": 544, "repeats": 1}  # the most the work cap accepts
    yield "3.2 shape", storage.shape_panel, {"L": 128, "H": 128, "D": 256, "S": storage.MAX_S, "filled_pct": 100}
    yield "3.2 bytes", lambda: storage.bytes_panel(storage.shape_panel()), {"B": storage.MAX_B, "dtype": "fp32"}
    yield "3.2 padding", storage.padding_panel, {"lengths": ", ".join(["1000000"] * 64), "block_size": 1,
                                                  "reserve": 256}
    yield "3.4 calculator", memory_estimate.calculator_panel, {"seq_len": memory_estimate.MAX_SEQ_LEN,
                                                                "batch_size": memory_estimate.MAX_BATCH}
    yield "3.4 fit", memory_estimate.fit_panel, {"seq_len": memory_estimate.MAX_SEQ_LEN,
                                                  "batch_size": memory_estimate.MAX_BATCH}
    yield "3.5 budget", misconceptions.budget_panel, "max"
    yield "3.5 weights", lambda: misconceptions.weights_panel(model, tok), "max"
    yield "3.5 k_only", lambda: misconceptions.k_only_panel(model, [tok.encode(misconceptions.DEFAULT_PROMPT)]), "max"
    yield "3.5 lab", lambda: misconceptions.lab_panel(model, tok), "max"
    yield "3.6 sharing", paged.sharing_panel, "max"
    yield "3.1 walkthrough", lambda: decode.walkthrough_panel(
        model, decode.decode_walkthrough(model, tok, decode.DEFAULT_PROMPT, steps=10)), "max"
    yield "3.2 growth", lambda: storage.growth_panel(storage.wide_cache_model()), "max"
    limit = model.config.max_seq_len - prefill_decode.TIMELINE_MAX_TOKENS
    longest = (tok.decode(tok.encode(misconceptions.DEFAULT_PROMPT)) * limit)[:limit]
    yield "3.3 timeline", lambda: prefill_decode.timeline_panel(model, tok), \
        {"prompt": longest, "new_tokens": prefill_decode.TIMELINE_MAX_TOKENS}
    padded = model.config.max_seq_len - prefill_decode.PADDED_NEW_TOKENS
    yield "3.3 padded batch", lambda: prefill_decode.padded_batch_panel(model, tok), \
        {"lengths": ", ".join([str(padded)] * 8), "block_size": 1}
    top = prefill_decode.max_prompt_len(prefill_decode.ROOFLINE_CONFIG)
    yield "3.3 prefill", lambda: prefill_decode.prefill_panel(fake_sweep(), prefill_decode.roofline_model(), 8), \
        {"lengths": ", ".join(str(top - i) for i in range(prefill_decode.MAX_CUSTOM_LENGTHS))}
    yield "3.3 batch", lambda: prefill_decode.batch_panel(chapter_batch(), ROOFS, fake_sweep(),
                                                          prefill_decode.roofline_model()), "max"
    yield "3.6 blocks", lambda: paged.blocks_panel(paged.animation_run(model, tok)), "max"
    yield "3.6 waste", lambda: paged.waste_panel(
        paged.compare_batching(model, paged.demo_requests(model, tok)).first("continuous"), model.config), "max"


CASES = ["3.1 walkthrough", "3.1 latency", "3.2 shape", "3.2 bytes", "3.2 growth", "3.2 padding", "3.3 timeline",
         "3.3 prefill", "3.3 batch", "3.3 padded batch", "3.4 calculator", "3.4 fit", "3.5 weights", "3.5 k_only",
         "3.5 budget", "3.5 lab", "3.6 blocks", "3.6 waste", "3.6 sharing"]


@pytest.mark.parametrize("name", CASES)
def test_panel_at_its_most_expensive_values_stays_under_the_bound(name, demo, record_property):
    cases = {n: (make, values) for n, make, values in _cases(demo) if n == name}
    make, values = cases[name]
    panel = make()
    if values == "max":
        values = _max_all(panel)
    measuring = panel.button is not None or name in MEASURES_ON_CHANGE

    def click():
        panel.set(**values)
        if measuring:
            panel.refresh()

    seconds, cpu, peak = cost(click)
    record_property("seconds", round(seconds, 2))
    record_property("cpu_seconds", round(cpu, 2))
    record_property("peak_mib", round(peak / 2**20, 1))
    print(f"{name}: {seconds:.2f} s wall, {cpu:.2f} s CPU, {peak / 2**20:.0f} MiB at "
          f"{values if len(str(values)) < 120 else '...'}")
    assert not panel.stale, panel.message.value  # the costliest value was accepted
    limit_s, limit_mib = (MEASURING_S, MEASURING_MIB) if measuring else (ARITHMETIC_S, ARITHMETIC_MIB)
    assert cpu < 2 * limit_s and peak < limit_mib * 2**20, (seconds, cpu, peak / 2**20)

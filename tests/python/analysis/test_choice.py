"""The one answer: ranked and priced on the step as seen, in units that do not change with the
model ($ per GPU-hour, $ per 1M steps), said in one verdict line."""
from __future__ import annotations

import pytest

from habitat.analysis.choice import GpuChoice, cheapest, fastest, format_usd, ranked, usd_per_million_steps, verdict


def gpu(name: str, seen: float, kernels: float, bound: bool | None, price: float | None,
        fits: bool | None = None) -> GpuChoice:
    return GpuChoice(name, seen, kernels, bound, price, fits)


def test_a_million_steps_cost_the_price_times_the_step_as_seen():
    assert usd_per_million_steps(3.6, 1.0) == pytest.approx(1.0)  # 1 ms a step at $3.60/h
    c = gpu("A", 2.987, 1.403, True, 4.29)
    assert c.usd_per_million_steps == pytest.approx(4.29 * 2.987 / 3.6)  # not the kernel sum
    assert gpu("B", 1.0, 1.0, None, None).usd_per_million_steps is None


@pytest.mark.parametrize("usd, shown", [(0, "0.00"), (1234.5, "1,234.50"), (0.5, "0.50"),
                                        (0.0062, "0.0062"), (0.00062, "0.00062"),
                                        (0.000012345, "0.000012")])
def test_usd_never_prints_scientific_or_zero_for_a_cost(usd, shown):
    assert format_usd(usd) == shown


def test_host_bound_gpus_tie_and_the_cheapest_of_them_wins():
    # The case: the fastest kernels (B200) do not make the step faster.
    choices = ranked([gpu("B200", 2.990, 0.70, True, 6.99), gpu("H100", 2.987, 1.403, True, 4.29),
                      gpu("A100", 2.988, 2.1, True, 2.50), gpu("L4", 9.0, 9.0, False, 0.90)])
    assert [c.gpu for c in choices] == ["H100", "A100", "B200", "L4"]
    assert fastest(choices).gpu == "H100" and cheapest(choices).gpu == "A100"
    line = verdict(choices)
    assert line.startswith("Fastest as seen: H100 (2.987 ms a step; within 2%: A100, B200).")
    assert f"Cheapest: A100 (${format_usd(usd_per_million_steps(2.5, 2.988))} per 1M steps at $2.50/h)." in line
    assert "Host-bound on H100, A100, B200: a faster GPU will not help." in line


def test_equal_steps_rank_the_cheaper_first_and_unpriced_last():
    choices = ranked([gpu("X", 5.0, 5.0, None, None), gpu("Y", 5.0, 5.0, None, 3.0),
                      gpu("Z", 5.0, 5.0, None, 1.0)])
    assert [c.gpu for c in choices] == ["Z", "Y", "X"]
    assert "No host timeline" in verdict(choices)


def test_float_noise_between_host_bound_steps_does_not_rank_them():
    # The same host cadence played on four GPUs (the demo's step): 1e-12 ms apart, equal.
    choices = ranked([gpu("A100", 12.444431999999761, 4.87, True, 2.50),
                      gpu("H100", 12.444431999999775, 2.14, True, 4.29),
                      gpu("L4", 12.444432000000099, 11.29, False, 0.80),
                      gpu("RTX-4090", 12.444431999999768, 3.74, True, 0.74)])
    assert [c.gpu for c in choices] == ["RTX-4090", "L4", "A100", "H100"]
    assert fastest(choices).gpu == "RTX-4090"


def test_gpus_the_step_does_not_fit_are_not_chosen():
    choices = ranked([gpu("small", 1.0, 1.0, False, 0.5, fits=False), gpu("big", 2.0, 2.0, False, 3.0, fits=True)])
    assert fastest(choices).gpu == "big" and cheapest(choices).gpu == "big"
    assert fastest([gpu("small", 1.0, 1.0, False, 0.5, fits=False)]).gpu == "small"  # none fits
    assert cheapest([gpu("free", 1.0, 1.0, False, None)]) is None
    assert "Cheapest" not in verdict([gpu("free", 1.0, 1.0, False, None)])


def test_every_gpu_host_bound_is_said_so_and_long_lists_are_counted():
    names = [f"G{i}" for i in range(7)]
    line = verdict(ranked([gpu(n, 3.0 + i * 1e-3, 1.0, True, 1.0) for i, n in enumerate(names)]))
    assert "Host-bound on every GPU" in line and "within 2%: G1, G2, G3, G4 and 2 more" in line

"""The committed weights on the committed H100 device-time collection's held-out problems: the
evaluation scores exactly the models' held-out split, from the repository alone (no
/work/shared), and the errors stay within the bounds weights/README.md ("Figures") implies."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch")

from habitat.evaluate import precision  # noqa: E402
from habitat.learned.devices import default_table  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
WEIGHTS = ROOT / "weights"
FAMILIES = ("gemm", "conv", "attention", "layernorm", "softmax")

# Upper bounds on the held-out mean % error over each precision's rows (device time, as the
# engine forecasts: a TF32 bmm or conv pass on its faster path, NCHW transforms, SDPA per
# backend): a few points above what the committed weights measure (gemm 9.8-10.3, conv 22.3-
# 28.0 on 5 problems of this collection, attention 5.9 / 7.5 / 10.6 in fp16 / bf16 / fp32 since
# the score tiles' padding became a feature (2026-11-28, fourteenth session; 8.2 / 8.7 / 19.5
# before: weights/README.md); layer norm 5.1-5.6, softmax 9.4-10.4); a regression fails.
BOUNDS = {"gemm": {"fp32": 13.0, "tf32": 13.0, "bf16": 13.0, "fp16": 13.0},
          "conv": {"fp32": 31.0, "tf32": 31.0, "bf16": 32.0},
          "attention": {"fp32": 14.0, "bf16": 10.0, "fp16": 9.0},
          "layernorm": {"fp32": 17.0, "bf16": 18.0},
          "softmax": {"fp32": 13.0, "bf16": 13.0}}


@pytest.fixture(scope="module")
def evaluated() -> dict:
    return precision.evaluate(precision.default_data(), WEIGHTS, default_table(), families=FAMILIES)


@pytest.mark.parametrize("family", FAMILIES)
def test_scores_exactly_the_models_held_out_split(evaluated: dict, family: str) -> None:
    split = json.loads((WEIGHTS / f"{family}.json").read_text())["split"]
    rows = split.get("test_rows_by_collection", {}).get(f"collection:{precision.DEFAULT_DATA.name}", split["test_rows"])
    assert sum(stats["all"]["n"] for stats in evaluated[family].values()) == rows


@pytest.mark.parametrize("family", FAMILIES)
def test_held_out_errors_stay_within_their_bounds(evaluated: dict, family: str) -> None:
    got = evaluated[family]
    assert set(got) == set(BOUNDS[family])
    for p, bound in BOUNDS[family].items():
        assert got[p]["all"]["mean"] < bound, (family, p, got[p]["all"]["mean"])


def test_every_collection_of_a_models_split_is_scored_on_its_own_held_out_rows() -> None:
    # A model trained on two device-time collections holds a fifth of each out; `evaluate
    # precision --data` scores either one's fifth (it named only the first before 2026-11-27).
    split = json.loads((WEIGHTS / "conv.json").read_text())["split"]
    assert len(split["collections"]) >= 2
    for name in split["collections"]:
        data = ROOT / "benchmarks" / "results" / "kernels" / name.removeprefix("collection:")
        got = precision.evaluate(data, WEIGHTS, default_table(), families=("conv",))
        assert sum(stats["all"]["n"] for stats in got["conv"].values()) == split["test_rows_by_collection"][name]


def test_a_collection_outside_the_split_asks_for_all_rows(tmp_path: Path) -> None:
    # rows the conv model trained on, in a collection its split does not name
    other = tmp_path / "H100-SXM5-80GB-elsewhere"
    other.mkdir()
    shutil.copy(ROOT / "benchmarks" / "results" / "kernels" / "H100-SXM5-80GB-2026-11-26" / "conv_bf16.csv", other)
    with pytest.raises(ValueError, match="--all-rows"):
        precision.evaluate(other, WEIGHTS, default_table(), families=("conv",))


def test_a_collection_some_models_trained_on_scores_theirs_and_names_the_rest() -> None:
    # layernorm trained on the H200's rows (2026-11-27); the softmax model did not.
    got = precision.evaluate(ROOT / "benchmarks" / "results" / "kernels" / "H200-SXM-141GB-2026-11-27",
                             WEIGHTS, default_table(), families=("softmax", "layernorm"))
    split = json.loads((WEIGHTS / "layernorm.json").read_text())["split"]
    rows = split["test_rows_by_collection"]["collection:H200-SXM-141GB-2026-11-27"]
    assert sum(stats["all"]["n"] for stats in got["layernorm"].values()) == rows
    assert got["not_split_on_it"] == ["softmax"] and "softmax" not in got

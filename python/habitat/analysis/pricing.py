"""GPU prices (USD per GPU-hour) for ranking GPUs by cost.

The packaged table (``habitat/data/prices.json``) lists dated on-demand offers per GPU, each
with its provider and source. A GPU's default price is the **lower median** of its dated
candidates: one offer per provider (its most recent), spot, community, reserved and
capacity-block prices excluded, the low end of a listed range. The lower median is always a
real offer that can be cited, and neither the hyperscalers' premium nor the cheapest
marketplace decides it alone. Undated offers count only for a GPU with no dated one.

Prices move, so users override them: a file named by ``HABITAT_PRICES``, ``--prices FILE`` on
the command line, or ``prices=`` / ``price_file=`` in :func:`habitat.analysis.compare`. A price file is
JSON (``{"A100": 1.89, "H100": {"usd_per_hour": 2.5, "source": "my contract"}}`` or this
package's own format) or CSV with a header ``gpu,usd_per_hour[,source][,date]``.
"""
from __future__ import annotations

import csv
import io
import math
import os
import warnings
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, Mapping

from habitat.data.devices import get_device
from habitat.data.input_files import loads_json, read_input_bytes

DEFAULT_PRICE_FILE = Path(__file__).resolve().parents[1] / "data" / "prices.json"
ENV_VAR = "HABITAT_PRICES"


class PriceFileError(ValueError):
    """A price file that cannot be read or understood; the message names the file and fix."""


@dataclass(frozen=True)
class Price:
    gpu: str             # canonical device name
    usd_per_hour: float
    provider: str = ""
    sku: str = ""
    date: str = ""       # when the source recorded the price ("" = undated)
    source: str = ""

    def describe(self) -> str:
        where = " ".join(x for x in (self.provider, self.sku and f"({self.sku})") if x)
        when = self.date or "undated"
        return f"${self.usd_per_hour:.2f}/h, {where or 'user price'}, {when}"


def _canonical(name: str) -> str:
    return get_device(name).name


def pick_default(candidates: list[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The documented rule: lower median of dated candidates (undated only when none is dated)."""
    dated = [c for c in candidates if c.get("date")]
    pool = sorted(dated or candidates, key=lambda c: float(c["usd_per_hour"]))
    if not pool:
        raise ValueError("no price candidates")
    return pool[(len(pool) - 1) // 2]


class PriceTable:
    """Prices by canonical GPU name; lookups accept any name the device database knows."""

    def __init__(self, prices: Mapping[str, Price] | None = None, *, date: str = "",
                 rule: str = "") -> None:
        self._prices: dict[str, Price] = dict(prices or {})
        self.date = date
        self.rule = rule

    def get(self, target: str) -> Price | None:
        if target in self._prices:
            return self._prices[target]
        return self._prices.get(_canonical(target))

    def price_per_hour(self, target: str) -> float | None:
        price = self.get(target)
        return None if price is None else price.usd_per_hour

    def overridden(self, other: "PriceTable | Mapping[str, float | Price]") -> "PriceTable":
        """A new table: this one with `other`'s entries replacing or adding prices."""
        extra = other._prices if isinstance(other, PriceTable) else _from_mapping(other, "prices=")
        return PriceTable({**self._prices, **extra}, date=self.date, rule=self.rule)

    def __iter__(self) -> Iterator[Price]:
        return iter(self._prices.values())

    def __len__(self) -> int:
        return len(self._prices)

    def __contains__(self, target: object) -> bool:
        return isinstance(target, str) and self.get(target) is not None

    def to_dict(self) -> dict[str, Any]:
        return {"date": self.date, "rule": self.rule,
                "prices": {name: asdict(p) for name, p in self._prices.items()}}


def _valid_price(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise PriceFileError(f"{where}: expected a price in USD per GPU-hour, got {value!r}")
    try:
        price = float(value)
    except ValueError:
        raise PriceFileError(f"{where}: {value!r} is not a number (USD per GPU-hour)") from None
    if not math.isfinite(price) or price < 0:
        raise PriceFileError(f"{where}: price must be a finite number >= 0, got {value!r}")
    return price


def _resolve(name: str, where: str) -> str:
    try:
        return _canonical(name)
    except ValueError as exc:  # UnknownDeviceError: its message lists the closest GPUs
        raise PriceFileError(f"{where}: unknown GPU {name!r}: {exc}") from None


def _price_entry(name: str, value: Any, where: str) -> Price:
    gpu = _resolve(name, where)
    if isinstance(value, Mapping):
        if "candidates" in value:  # the packaged format: apply the documented rule
            chosen = pick_default(list(value["candidates"]))
            return Price(gpu, _valid_price(chosen["usd_per_hour"], where),
                         **{k: str(chosen.get(k, "")) for k in ("provider", "sku", "date", "source")})
        if "usd_per_hour" not in value:
            raise PriceFileError(f"{where}: entry for {name!r} needs \"usd_per_hour\"")
        return Price(gpu, _valid_price(value["usd_per_hour"], where),
                     **{k: str(value.get(k, "")) for k in ("provider", "sku", "date", "source")})
    return Price(gpu, _valid_price(value, where), source="user")


def _from_mapping(prices: Mapping[str, Any], where: str) -> dict[str, Price]:
    out: dict[str, Price] = {}
    for name, value in prices.items():
        if isinstance(value, Price):
            out[_resolve(name, where)] = value
        else:
            entry = _price_entry(str(name), value, f"{where} {name!r}")
            out[entry.gpu] = entry
    return out


def _parse_csv(text: str, where: str) -> dict[str, Price]:
    reader = csv.DictReader(io.StringIO(text))
    fields = [f.strip().lower() for f in reader.fieldnames or []]
    if "gpu" not in fields or "usd_per_hour" not in fields:
        raise PriceFileError(f"{where}: a CSV price file needs a header line "
                             "'gpu,usd_per_hour[,source][,date]'")
    reader.fieldnames = fields
    out: dict[str, Price] = {}
    for line, row in enumerate(reader, start=2):
        if not row.get("gpu"):
            continue
        entry = _price_entry(row["gpu"].strip(), {k: (v or "").strip() for k, v in row.items()
                                                  if k is not None}, f"{where}, line {line}")
        out[entry.gpu] = entry
    return out


def parse_prices(text: str, where: str = "prices") -> PriceTable:
    """Parses a price document (JSON or CSV text); `where` names it in error messages."""
    stripped = text.lstrip()
    if not stripped.startswith(("{", "[")):
        return PriceTable(_parse_csv(text, where), date="user")
    try:
        doc = loads_json(text, where)
    except ValueError as exc:
        raise PriceFileError(f"{exc}; expected {{\"A100\": 1.89, ...}} or a CSV "
                             "'gpu,usd_per_hour'") from None
    if not isinstance(doc, dict):
        raise PriceFileError(f"{where}: expected a JSON object mapping GPU names to prices")
    if doc.get("format") == "habitat-prices":
        entries = doc.get("prices")
        if not isinstance(entries, dict):
            raise PriceFileError(f"{where}: \"prices\" must be an object keyed by GPU name")
        return PriceTable(_from_mapping(entries, where), date=str(doc.get("compiled", "")),
                          rule=str(doc.get("rule", "")))
    return PriceTable(_from_mapping(doc, where), date="user")


def load_prices(path: str | Path) -> PriceTable:
    """Reads a user price file (JSON or CSV, see the module docs); only its own entries."""
    path = Path(path)
    try:
        text = read_input_bytes(path, "price file").decode("utf-8")
    except FileNotFoundError:
        raise PriceFileError(f"price file {str(path)!r} does not exist: check the path "
                             f"(given with --prices, price_file= or {ENV_VAR})") from None
    except (OSError, ValueError) as exc:  # UnicodeDecodeError, InputLimitError (a FIFO, too big)
        raise PriceFileError(f"cannot read price file {str(path)!r}: {exc}") from None
    return parse_prices(text, f"price file {str(path)!r}")


@lru_cache(maxsize=1)
def default_prices() -> PriceTable:
    """The packaged, dated default prices (see the module docs for the rule)."""
    return load_prices(DEFAULT_PRICE_FILE)


@lru_cache(maxsize=4)
def _env_prices(path: str, mtime: float) -> PriceTable:
    del mtime  # part of the cache key: an edited file is read again
    return load_prices(path)


def current_prices() -> PriceTable:
    """The defaults with the overrides of the file named by ``HABITAT_PRICES``, if set."""
    table = default_prices()
    path = os.environ.get(ENV_VAR)
    if not path:
        return table
    try:
        mtime = os.stat(path).st_mtime
    except OSError:
        raise PriceFileError(f"{ENV_VAR}={path!r} names no readable file: fix or unset it") from None
    return table.overridden(_env_prices(path, mtime))


def price_table(prices: "PriceTable | Mapping[str, Any] | None" = None,
                price_file: str | Path | None = None) -> PriceTable:
    """Defaults, then ``HABITAT_PRICES``, then `price_file`, then `prices`: later ones win."""
    table = current_prices()
    if price_file is not None:
        table = table.overridden(load_prices(price_file))
    if prices is not None:
        table = table.overridden(prices)
    return table


def price_per_hour(target: str) -> float | None:
    """USD per GPU-hour of `target` (defaults plus ``HABITAT_PRICES``); None when unpriced.

    Used by ``print(forecast)``: a broken ``HABITAT_PRICES`` file is a warning here (the
    defaults are used), where :func:`current_prices` and ``compare`` raise.
    """
    try:
        table = current_prices()
    except PriceFileError as exc:
        warnings.warn(f"{exc}; using the default prices", stacklevel=2)
        table = default_prices()
    return table.price_per_hour(target)

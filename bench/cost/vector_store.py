"""The monthly bill of a vector store of many chunks, per vector setting (docs/cost.md, "Ten million chunks").

From ``make bench-vectors``'s measured bytes a chunk (a committed copy of its report): the cheapest
managed domain whose nodes' k-NN memory holds the vectors with the replicas the stack configures
(as infra.constructs.search.index_replicas, which loads the CDK), OpenSearch Serverless classic (its
OCU floor) and its NextGen collections that scale to zero when idle. Every price is bench.cost.prices'; the sizing
rules and what they assume are docs/cost.md's. Imports bench.cost only.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.cost import prices

#: The last bench.vector_settings report, kept beside the cost measurements (bench/results/ is not committed).
VECTOR_MEASUREMENT = Path(__file__).with_name("vector-settings-2026-12-08.json")
STORE_CHUNKS = 10_000_000
GIB = 2**30
#: OpenSearch Service gives the JVM heap half of an instance's memory, at most 32 GiB; the k-NN
#: plugin's circuit breaker allows its graphs half of the rest (docs/cost.md cites both).
HEAP_SHARE, HEAP_CAP_GIB, KNN_SHARE_OF_REST = 0.5, 32, 0.5
#: An OCU: 6 GiB of memory; its vector share is assumed to follow the domain's rule (undocumented).
OCU_RAM_GIB = 6.0
#: Bytes a chunk holds besides its vector files (text, stored source, doc values, keyword terms):
#: measured on the local stack's chunk index of the sample PDFs (docs/cost.md).
OTHER_BYTES_PER_CHUNK = 5628
#: OpenSearch Service keeps 20 % of each node's volume for itself (docs/cost.md); gp3's least is 10 GB.
EBS_RESERVED_SHARE, EBS_MIN_GB = 0.2, 10
MAX_NODES = 24
#: NextGen collections bill OCU-hours only while they serve: a team's working hours, by assumption.
ASSUMED_ACTIVE_HOURS = 8 * 22


def index_replicas(nodes: int) -> int:
    """The replicas the stack gives the chunk index on ``nodes`` nodes (a test holds it to infra's)."""
    return min(nodes - 1, 2)


@dataclass(frozen=True)
class StoreBill:
    option: str
    monthly_usd: float
    how: str


def knn_memory_gib(ram_gib: float) -> float:
    """The k-NN memory of one node: half of what the heap leaves."""
    heap = min(ram_gib * HEAP_SHARE, HEAP_CAP_GIB)
    return (ram_gib - heap) * KNN_SHARE_OF_REST


def domain_bill(searched_bytes: float, stored_bytes: float) -> StoreBill | None:
    """The cheapest domain of 2 or more nodes (one replica at least: a production store) whose
    nodes each hold their share of the searched vector bytes in k-NN memory; None if none fits."""
    best: StoreBill | None = None
    for instance, ram_gib in prices.OPENSEARCH_INSTANCE_RAM_GIB.items():
        if instance.startswith("t3."):
            continue  # burstable: its CPU credits run out under a production store's steady searches
        hourly = prices.OPENSEARCH_INSTANCE_HOUR[instance].usd
        for nodes in range(2, MAX_NODES + 1):
            copies = index_replicas(nodes) + 1
            if searched_bytes * copies / nodes > knn_memory_gib(ram_gib) * GIB:
                continue
            volume_gb = max(EBS_MIN_GB, math.ceil(stored_bytes * copies / nodes / 1e9 / (1 - EBS_RESERVED_SHARE)))
            monthly = nodes * (hourly * prices.HOURS_PER_MONTH + volume_gb * prices.OPENSEARCH_GP3_GB_MONTH.usd)
            if best is None or monthly < best.monthly_usd:
                best = StoreBill(
                    f"managed domain, {nodes} x {instance}, {copies - 1} replica(s)",
                    monthly,
                    f"{nodes} x (${hourly}/h x {prices.HOURS_PER_MONTH} h + {volume_gb} GB gp3)",
                )
            break
    return best


def search_ocus(searched_bytes: float, redundant: bool) -> float:
    """Search OCUs a vector collection needs to hold the vectors in memory: half an OCU at least,
    then whole ones; doubled by the standby replicas when redundant."""
    per_ocu = knn_memory_gib(OCU_RAM_GIB) * GIB
    needed = searched_bytes / per_ocu
    ocus = 0.5 if needed <= 0.5 else float(math.ceil(needed))
    return ocus * (2 if redundant else 1)


def serverless_bills(searched_bytes: float, stored_bytes: float) -> list[StoreBill]:
    """Classic (always on, indexing at its floor) and NextGen (both at zero outside active hours)."""
    storage = stored_bytes / GIB * prices.OPENSEARCH_SERVERLESS_STORAGE_GB_MONTH.usd
    ocu_hour = prices.OPENSEARCH_SERVERLESS_OCU_HOUR.usd
    bills = []
    for redundant in (True, False):
        search = search_ocus(searched_bytes, redundant)
        indexing = 1.0 if redundant else 0.5
        label = "redundant" if redundant else "no redundancy (dev/test)"
        bills.append(
            StoreBill(
                f"Serverless classic, {label}",
                (search + indexing) * ocu_hour * prices.HOURS_PER_MONTH + storage,
                f"({search:g} search + {indexing:g} indexing OCU) x ${ocu_hour}/h x {prices.HOURS_PER_MONTH} h"
                f" + {stored_bytes / GIB:.0f} GiB x ${prices.OPENSEARCH_SERVERLESS_STORAGE_GB_MONTH.usd}",
            )
        )
    search = search_ocus(searched_bytes, True)
    bills.append(
        StoreBill(
            "Serverless NextGen, redundant, scales to zero",
            (search + 1.0) * ocu_hour * ASSUMED_ACTIVE_HOURS + storage,
            f"({search:g} search + 1 indexing OCU) x ${ocu_hour}/h x {ASSUMED_ACTIVE_HOURS} active h + storage",
        )
    )
    return bills


def store_bills(setting: dict[str, Any], chunks: int = STORE_CHUNKS) -> list[StoreBill]:
    """Every option's monthly bill for ``chunks`` chunks of one measured setting."""
    searched = setting["searched_bytes_per_chunk"] * chunks
    stored = (setting["vector_files_bytes_per_chunk"] + OTHER_BYTES_PER_CHUNK) * chunks
    domain = domain_bill(searched, stored)
    return [*([domain] if domain else []), *serverless_bills(searched, stored)]


#: Titan Text Embeddings V2's output sizes (docs/cost.md cites the request shape).
TITAN_DIMENSIONS = (1024, 512, 256)
#: Lucene's quantized vector: a byte a dimension and a float correction.
SQ_CORRECTION_BYTES = 4


def titan_modelled(report: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Titan V2's vectors at each size, as the measured index stores vectors: 4 bytes a float, a
    byte a dimension plus a correction for sq, a bit for binary; the HNSW graph's bytes a chunk as
    measured (float32's for floats, binary's for bits). A model: Titan cannot run offline."""
    measured = report["memory"]
    graph = {
        name: sum(measured[name]["file_bytes"].get(ext, 0) for ext in ("vex", "vem")) / measured[name]["chunks"]
        for name in ("float32", "binary")
    }
    rows: dict[str, dict[str, float]] = {}
    for dimension in TITAN_DIMENSIONS:
        floats = 4.0 * dimension + graph["float32"]
        quantized = dimension + SQ_CORRECTION_BYTES + graph["float32"]
        rows[f"Titan {dimension} float32"] = {
            "searched_bytes_per_chunk": floats,
            "vector_files_bytes_per_chunk": floats,
        }
        rows[f"Titan {dimension} sq"] = {
            "searched_bytes_per_chunk": quantized,
            "vector_files_bytes_per_chunk": quantized + 4.0 * dimension,
        }
    bits = TITAN_DIMENSIONS[0] / 8 + graph["binary"]
    rows[f"Titan {TITAN_DIMENSIONS[0]} binary"] = {
        "searched_bytes_per_chunk": bits,
        "vector_files_bytes_per_chunk": bits,
    }
    return rows


def render_store(measurement: Path = VECTOR_MEASUREMENT, chunks: int = STORE_CHUNKS) -> list[str]:
    """docs/cost.md's table: per setting, the vectors' memory and each option's monthly bill."""
    if not measurement.is_file():
        return [f"(no vector measurement at {measurement}: make bench-vectors, then copy its report there)"]
    report = json.loads(measurement.read_text())
    out = [
        f"A store of {chunks:,} chunks, per vector setting (us-east-1, {prices.HOURS_PER_MONTH} h a month; "
        f"measured bytes from {measurement.name}):",
        "",
        "| setting | k-NN memory, GiB | option | USD per month | how |",
        "|---|---|---|---|---|",
    ]
    settings = {
        **{f"{name} (measured, local model)": row for name, row in report["memory"].items()},
        **{f"{name} (modelled)": row for name, row in titan_modelled(report).items()},
    }
    for name, measured in settings.items():
        memory_gib = measured["searched_bytes_per_chunk"] * chunks / GIB
        for bill in store_bills(measured, chunks):
            out.append(f"| {name} | {memory_gib:.1f} | {bill.option} | ${bill.monthly_usd:,.0f} | {bill.how} |")
    return out

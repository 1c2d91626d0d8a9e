"""The vector encoding setting: from cdk.json to the functions' environment to the index mapping, the
benchmark's vector shapes, and the 10,000,000-chunk store's sizing (bench.cost.vector_store)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError
from rag_ingest.adapters.vector_store import IndexSettings, VectorStore
from rag_ingest.core.config import IndexParamsEnv
from rag_ingest.core.errors import ConfigurationError
from rag_ingest.wiring import index_settings_for

from bench.cost import prices
from bench.cost.vector_store import (
    GIB,
    domain_bill,
    index_replicas,
    knn_memory_gib,
    search_ocus,
    serverless_bills,
    store_bills,
    titan_modelled,
)
from bench.vector_settings import SETTINGS, VectorSetting, documented_bytes_per_vector, shaped
from infra.config import parse_config

pytestmark = pytest.mark.unit


def embedding_mapping(settings: IndexSettings) -> dict[str, Any]:
    mapping: dict[str, Any] = VectorStore(None, settings).mapping()  # type: ignore[arg-type]
    return dict(mapping["mappings"]["properties"]["embedding"])


def test_float32_maps_plain_lucene_hnsw_as_before() -> None:
    field = embedding_mapping(IndexSettings(name="i", dimension=384, vector_encoding="float32"))
    assert field == {
        "type": "knn_vector",
        "dimension": 384,
        "method": {
            "name": "hnsw",
            "engine": "lucene",
            "space_type": "cosinesimil",
            "parameters": {"m": 16, "ef_construction": 128},
        },
    }


def test_sq_asks_lucene_for_its_7_bit_scalar_quantizer() -> None:
    field = embedding_mapping(IndexSettings(name="i", dimension=384, vector_encoding="sq"))
    assert field["method"]["parameters"]["encoder"] == {"name": "sq", "parameters": {"bits": 7}}
    assert field["method"]["space_type"] == "cosinesimil" and "data_type" not in field


def test_binary_maps_packed_bits_compared_by_hamming_distance() -> None:
    field = embedding_mapping(IndexSettings(name="i", dimension=384, vector_encoding="binary"))
    assert field["data_type"] == "binary" and field["dimension"] == 384
    assert field["method"]["space_type"] == "hamming" and "encoder" not in field["method"]["parameters"]


def test_the_environment_carries_the_encoding_into_the_index_settings_and_sq_ships() -> None:
    params = IndexParamsEnv.from_env({"OPENSEARCH_VECTOR_ENCODING": "float32"})
    assert index_settings_for("i", 384, params).vector_encoding == "float32"
    assert index_settings_for("i", 384).vector_encoding == "sq"
    assert IndexSettings(name="i", dimension=384).vector_encoding == "sq"
    assert parse_config({}).opensearch.vector_encoding == "sq"


@pytest.mark.parametrize("value", ["binary", "int8", "SQ", ""])
def test_an_encoding_the_embedders_cannot_feed_fails_at_cold_start_naming_the_variable(value: str) -> None:
    with pytest.raises(ConfigurationError, match="OPENSEARCH_VECTOR_ENCODING"):
        IndexParamsEnv.from_env({"OPENSEARCH_VECTOR_ENCODING": value})


def test_cdk_json_accepts_the_two_encodings_and_refuses_others() -> None:
    assert parse_config({"opensearch": {"vectorEncoding": "sq"}}).opensearch.vector_encoding == "sq"
    assert parse_config({"opensearch": {"vectorEncoding": "float32"}}).opensearch.vector_encoding == "float32"
    with pytest.raises((ValidationError, ValueError), match=r"vectorEncoding|vector_encoding"):
        parse_config({"opensearch": {"vectorEncoding": "binary"}})


def test_the_bench_truncates_and_renormalises_or_packs_sign_bits() -> None:
    vectors = np.array([[3.0, 4.0, -1.0, 0.5, -2.0, 1.0, 1.0, -1.0, 2.0]], dtype=np.float32)
    [truncated] = shaped(vectors, VectorSetting("t", "float32", 2, ""))
    assert truncated == pytest.approx([0.6, 0.8])
    [packed] = shaped(vectors[:, :8], VectorSetting("b", "binary", 8, ""))
    assert packed == [np.int8(np.uint8(0b11010110).view(np.int8))]  # signs + + - + - + + -


def test_the_documented_estimates_follow_opensearchs_formulas() -> None:
    by_name = {setting.name: setting for setting in SETTINGS}
    assert documented_bytes_per_vector(by_name["float32"]) == pytest.approx(1.1 * (4 * 384 + 8 * 16))
    assert documented_bytes_per_vector(by_name["sq7"]) == pytest.approx(1.1 * (384 + 8 * 16))
    assert documented_bytes_per_vector(by_name["binary"]) == pytest.approx(1.1 * (384 / 8 + 8 * 16))


def test_the_replicas_follow_the_stack() -> None:
    from infra.constructs.search import index_replicas as stack_replicas

    assert [index_replicas(n) for n in range(1, 7)] == [stack_replicas(n) for n in range(1, 7)]


def test_a_node_gives_vectors_half_of_what_its_heap_leaves() -> None:
    assert knn_memory_gib(16) == 4.0  # 8 GiB heap
    assert knn_memory_gib(128) == 48.0  # the heap stops at 32 GiB


def test_the_domain_is_the_cheapest_that_holds_every_copy() -> None:
    bill = domain_bill(searched_bytes=10 * GIB, stored_bytes=50e9)
    assert bill is not None
    # Two r6g.2xlarge (16 GiB of k-NN memory each) hold a copy each: $990.7. Four r6g.xlarge (3 copies
    # over 4 nodes, 7.5 GiB each) cost $998.2, eight r6g.large $998.7.
    hourly = prices.OPENSEARCH_INSTANCE_HOUR["r6g.2xlarge.search"].usd
    assert bill.option == "managed domain, 2 x r6g.2xlarge.search, 1 replica(s)"
    assert bill.monthly_usd == pytest.approx(2 * (hourly * prices.HOURS_PER_MONTH + 63 * 0.122))


def test_serverless_needs_search_ocus_for_the_vectors_and_doubles_them_for_redundancy() -> None:
    assert search_ocus(0.5 * GIB, redundant=True) == 1.0  # half an OCU, twice
    assert search_ocus(4 * GIB, redundant=False) == 3.0  # 1.5 GiB of vectors an OCU
    classic, dev, nextgen = serverless_bills(4 * GIB, 0)
    assert classic.monthly_usd == pytest.approx((6 + 1) * 0.24 * 730)
    assert dev.monthly_usd == pytest.approx((3 + 0.5) * 0.24 * 730)
    assert nextgen.monthly_usd < classic.monthly_usd


def test_store_bills_scale_the_measured_bytes_to_the_store() -> None:
    bills = store_bills({"searched_bytes_per_chunk": 100.0, "vector_files_bytes_per_chunk": 100.0}, chunks=1000)
    assert [bill.option.split(",")[0] for bill in bills] == [
        "managed domain",
        "Serverless classic",
        "Serverless classic",
        "Serverless NextGen",
    ]


def test_titan_is_modelled_from_the_measured_index_structure() -> None:
    report = {
        "memory": {
            "float32": {"chunks": 10, "file_bytes": {"vec": 15360, "vex": 250, "vem": 5}},
            "binary": {"chunks": 10, "file_bytes": {"vec": 480, "vex": 350, "vem": 5}},
        }
    }
    rows = titan_modelled(report)
    assert rows["Titan 1024 float32"]["searched_bytes_per_chunk"] == 4096 + 25.5
    assert rows["Titan 256 sq"]["searched_bytes_per_chunk"] == 256 + 4 + 25.5
    assert rows["Titan 256 sq"]["vector_files_bytes_per_chunk"] == 256 + 4 + 25.5 + 1024  # the floats stay on disk
    assert rows["Titan 1024 binary"]["searched_bytes_per_chunk"] == 128 + 35.5

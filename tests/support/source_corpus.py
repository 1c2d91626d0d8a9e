"""A bucket of small, distinct Markdown documents for an S3 source, and what the local stack holds
for them: the documents table's records by source URI and the uploads' S3 versions. Used by
bench/sync_s3.py and tests/reliability/test_source_sync_restart.py; boto3 clients are the caller's."""

from __future__ import annotations

import random
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

_SUBJECTS = (
    "the harbour master", "a lighthouse keeper", "the ferry crew", "the tide gauge", "a survey team",
    "the lifeboat station", "the fish market", "a cargo barge", "the dredger", "the pilot boat",
    "the weather buoy", "a salt marsh warden", "the coastguard", "a kayak club", "the breakwater",
)  # fmt: skip
_VERBS = (
    "records", "inspects", "repairs", "measures", "reports", "schedules", "charts", "checks",
    "photographs", "logs", "replaces", "calibrates", "patrols", "monitors", "cleans",
)  # fmt: skip
_OBJECTS = (
    "the mooring chains", "the northern channel", "the tide tables", "the foghorn", "the quay lights",
    "the sandbanks", "the shipping lane", "the radio mast", "the slipway", "the wave height",
    "the seal colony", "the harbour wall", "the navigation buoys", "the rain gauge", "the pontoons",
)  # fmt: skip
_WHEN = (
    "before dawn", "at low water", "every second Tuesday", "after each storm", "during the spring tides",
    "in the autumn gales", "once a month", "when the fog lifts", "at the turn of the tide", "on market days",
)  # fmt: skip
_CONSONANTS = "bcdfghjklmnprstvz"
_VOWELS = "aeiou"


def codeword(index: int) -> str:
    """A made-up word only document ``index`` holds, for finding it (and not finding it) by search."""
    letters = []
    value = index
    for position in range(6):
        alphabet = _CONSONANTS if position % 2 == 0 else _VOWELS
        value, digit = divmod(value, len(alphabet))
        letters.append(alphabet[digit])
    return "q" + "".join(letters) + "x"


def document_text(index: int, seed: int = 0, revision: int = 0) -> str:
    """A short Markdown document of generated sentences, different for every index and revision."""
    rng = random.Random(f"{seed}:{index}:{revision}")
    lines = [f"# Harbour note {index} ({codeword(index)})", ""]
    for _ in range(rng.randint(6, 12)):
        when = rng.choice(_WHEN)
        count = rng.randint(2, 97)
        lines.append(
            f"{rng.choice(_SUBJECTS).capitalize()} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {when}, "
            f"{count} times in year {1990 + rng.randint(0, 35)} at berth {rng.randint(1, 400)}."
        )
    if revision:
        lines.append(f"Revised note {revision}: {rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)}.")
    return "\n".join(lines) + "\n"


def corpus(count: int, prefix: str = "notes/", seed: int = 0) -> dict[str, bytes]:
    """``count`` objects: key -> Markdown bytes."""
    return {f"{prefix}{index:06d}.md": document_text(index, seed).encode() for index in range(count)}


def put_objects(s3: Any, bucket: str, bodies: Mapping[str, bytes], workers: int = 8) -> None:
    def put(item: tuple[str, bytes]) -> None:
        s3.put_object(Bucket=bucket, Key=item[0], Body=item[1], ContentType="text/markdown")

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="put") as pool:
        list(pool.map(put, bodies.items()))


def delete_objects(s3: Any, bucket: str, keys: list[str]) -> None:
    for start in range(0, len(keys), 1000):
        batch = [{"Key": key} for key in keys[start : start + 1000]]
        s3.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})


def source_records(documents_table: Any, source_id: str) -> dict[str, list[dict[str, Any]]]:
    """Every record of the documents table that names ``source_id``, by source URI (a list, so a
    duplicate shows), read straight from moto with one paginated, consistent Scan."""
    found: dict[str, list[dict[str, Any]]] = {}
    kwargs: dict[str, Any] = {
        "ConsistentRead": True,
        "FilterExpression": "source_id = :source",
        "ExpressionAttributeValues": {":source": source_id},
    }
    while True:
        page = documents_table.scan(**kwargs)
        for item in page.get("Items", []):
            found.setdefault(str(item.get("source_uri")), []).append(item)
        if "LastEvaluatedKey" not in page:
            return found
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def object_versions(s3: Any, bucket: str, prefix: str) -> dict[str, list[str]]:
    """Every version id under ``prefix`` by key (delete markers left out)."""
    versions: dict[str, list[str]] = {}
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=prefix):
        for version in page.get("Versions", []):
            versions.setdefault(version["Key"], []).append(version["VersionId"])
    return versions

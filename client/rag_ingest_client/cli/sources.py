"""``rag-ingest sources``: add (s3, web, custom), ls, show, sync [--wait], status, rm, and the custom
source's put and delete-item, against the routes of docs/sources.md; their parsers and rendering.

Metadata and readers are parsed as ``upload`` parses them (``filters.parse_meta``,
``upload.upload_access``). May import: the rest of ``rag_ingest_client.cli``, ``http``, ``uploads``.
"""

from __future__ import annotations

import argparse
import base64
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rag_ingest_client.cli.api import ApiClient
from rag_ingest_client.cli.console import Console
from rag_ingest_client.cli.errors import CliError
from rag_ingest_client.cli.filters import parse_meta
from rag_ingest_client.cli.upload import refusal, upload_access
from rag_ingest_client.http import ApiError

#: The counters of a sync, in the order Bedrock's ingestion jobs report them.
STATISTICS = ("scanned", "added", "modified", "unchanged", "deleted", "failed")
SYNC_TERMINAL = frozenset({"COMPLETE", "FAILED"})
#: How often ``sync --wait`` reads the sync again, and how it waits (tests put their own clock here).
SYNC_POLL_SECONDS = 2.0
pause: Callable[[float], None] = time.sleep
#: Files sent as ``text`` (when UTF-8); every other file goes as ``content_base64``.
TEXT_SUFFIXES = frozenset({".txt", ".md", ".markdown", ".html", ".htm"})
_SCHEDULE = re.compile(r"(rate|cron)\(.+\)")


def schedule_expression(text: str) -> str:
    """An EventBridge Scheduler expression, ``rate(...)`` or ``cron(...)`` (the API checks the rest)."""
    if not _SCHEDULE.fullmatch(text.strip()):
        raise argparse.ArgumentTypeError(f"{text!r}: expected rate(...) or cron(...), e.g. 'rate(1 day)'")
    return text.strip()


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be at least 1")
    return value


def positive_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be above 0")
    return value


# ---------------------------------------------------------------- the request bodies
def source_body(args: argparse.Namespace) -> dict[str, Any]:
    """``POST /sources``'s body from ``sources add KIND ...``: only the options given, the API's
    defaults for the rest (docs/sources.md)."""
    kind = args.kind
    if kind == "s3":
        config: dict[str, Any] = {"bucket": args.bucket}
        if args.prefix is not None:
            config["prefix"] = args.prefix
        for option in ("include", "exclude"):
            if getattr(args, option):
                config[option] = list(getattr(args, option))
        name = args.name or f"s3://{args.bucket}/{args.prefix or ''}"
    elif kind == "web":
        if not args.seeds and not args.sitemaps:
            raise CliError("sources add web needs --seed URL or --sitemap URL")
        config = {"seeds": list(args.seeds or []), "sitemaps": list(args.sitemaps or [])}
        scope = {k: v for k, v in (("host", args.scope_host), ("path_prefix", args.scope_prefix)) if v is not None}
        if scope:
            config["scope"] = scope
        for option in ("max_pages", "max_depth", "max_page_bytes", "requests_per_second", "concurrency"):
            if getattr(args, option) is not None:
                config[option] = getattr(args, option)
        if args.tracking_parameters:
            config["tracking_parameters"] = list(args.tracking_parameters)
        name = args.name or urlsplit((args.seeds or args.sitemaps)[0]).netloc
    else:  # custom
        config = {}
        name = args.name
    body: dict[str, Any] = {"kind": kind, "name": name, "config": config}
    if args.schedule:
        body["schedule"] = args.schedule
    metadata = parse_meta(args.meta)
    if metadata:
        body["metadata"] = metadata
    access = upload_access(args.readers, args.reader_groups)
    if access:
        body["access"] = access
    return body


def item_body(path: Path, metadata: dict[str, Any] | None, access: dict[str, list[str]] | None) -> dict[str, Any]:
    """``PUT /sources/{id}/items/{external_id}``'s body: a UTF-8 text file as ``text``, any other as
    ``content_base64``; a file no upload would take is refused here, as ``upload`` does."""
    if not path.is_file():
        raise CliError(f"{path}: no such file")
    reason = refusal(path)
    if reason:
        raise CliError(f"{path.name}: refused: {reason}")
    data = path.read_bytes()
    body: dict[str, Any] = {"filename": path.name}
    try:
        text = data.decode("utf-8") if path.suffix.lower() in TEXT_SUFFIXES else None
    except UnicodeDecodeError:
        text = None
    if text is not None:
        body["text"] = text
    else:
        body["content_base64"] = base64.b64encode(data).decode("ascii")
    if metadata:
        body["metadata"] = metadata
    if access:
        body["access"] = access
    return body


# ---------------------------------------------------------------- rendering
def statistics_text(statistics: dict[str, Any] | None) -> str:
    """``scanned 120, added 100, modified 3, unchanged 15, deleted 0, failed 2``."""
    statistics = statistics or {}
    return ", ".join(f"{name} {int(statistics.get(name) or 0)}" for name in STATISTICS)


def sync_line(sync: dict[str, Any] | None) -> str:
    """``COMPLETE 2026-12-01T05:00:00`` or ``never``: a source's last sync, for the table."""
    if not sync:
        return "never"
    when = str(sync.get("ended_at") or sync.get("started_at") or "")[:19]
    return f"{sync.get('status', '?')} {when}".rstrip()


def source_rows(sources: list[dict[str, Any]]) -> list[str]:
    """The ``sources ls`` table: id, kind, name, last sync; its statistics last (not padded)."""
    rows = [("ID", "KIND", "NAME", "LAST SYNC", "STATISTICS")]
    for source in sources:
        last = source.get("last_sync")
        rows.append(
            (
                str(source.get("id", "")),
                str(source.get("kind", "")),
                str(source.get("name") or ""),
                sync_line(last),
                statistics_text(last.get("statistics")) if last else "-",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[-1]
            for row in rows]  # fmt: skip


def where_text(source: dict[str, Any]) -> str:
    """Where a source reads: ``s3://bucket/prefix``, its seeds and sitemaps, or ``pushed items``."""
    config = source.get("config") or {}
    if source.get("kind") == "s3":
        return f"s3://{config.get('bucket', '?')}/{config.get('prefix') or ''}"
    if source.get("kind") == "web":
        return ", ".join([*(config.get("seeds") or []), *(f"sitemap {u}" for u in config.get("sitemaps") or [])])
    return "pushed items (PUT /sources/{id}/items/{external_id})"


def source_lines(source: dict[str, Any]) -> list[str]:
    access = source.get("access") or {}
    users, groups = access.get("users") or [], access.get("groups") or []
    lines = [
        f"{source.get('id')}  {source.get('kind')}  {source.get('name') or ''}",
        f"  reads     {where_text(source)}",
    ]
    for key, value in sorted((source.get("config") or {}).items()):
        if key not in ("bucket", "prefix", "seeds", "sitemaps") and value not in (None, [], {}):
            lines.append(f"  {key:<9} {_shown(value)}")
    lines.append(f"  schedule  {source.get('schedule') or 'on request only'}")
    metadata = source.get("metadata") or {}
    lines.append("  metadata  " + (", ".join(f"{k}={_shown(v)}" for k, v in sorted(metadata.items())) or "none"))
    if users or groups:
        lines.append(f"  readers   users: {', '.join(users) or '-'}; groups: {', '.join(groups) or '-'}")
    else:
        lines.append("  readers   the whole tenant")
    lines.append(f"  created   {source.get('created_at')}   updated {source.get('updated_at')}")
    last = source.get("last_sync")
    lines.append(f"  last sync {sync_line(last)}" + (f"  ({last.get('id')})" if last else ""))
    if last:
        lines.append(f"            {statistics_text(last.get('statistics'))}")
    return lines


def sync_lines(sync: dict[str, Any]) -> list[str]:
    """One sync: id, status, times, statistics, then each failed item with its code and reason."""
    ended = f" → {sync['ended_at']}" if sync.get("ended_at") else ""
    lines = [
        f"{sync.get('id')}  {sync.get('status')}  {sync.get('started_at')}{ended}",
        f"  {statistics_text(sync.get('statistics'))}",
    ]
    if sync.get("status") == "IN_PROGRESS":
        lines.append(f"  listed {int(sync.get('listed') or 0)} so far (counted above as they are applied)")
    if sync.get("status") == "IN_PROGRESS" and not sync.get("listing_complete"):
        lines.append("  listing not complete yet: nothing is deleted before it is")
    failures = sync.get("failures") or []
    failed = int((sync.get("statistics") or {}).get("failed") or 0)
    if failures:
        lines.append(f"  failures ({len(failures)} of {failed} shown):" if failed > len(failures) else "  failures:")
        for failure in failures:
            where = failure.get("uri") or failure.get("item")
            lines.append(f"    {where}: {failure.get('code')}: {failure.get('reason') or ''}".rstrip())
    return lines


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(map(str, value))
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return str(value)


# ---------------------------------------------------------------- the commands
def add_source(api: ApiClient, console: Console, args: argparse.Namespace) -> int:
    source = api.create_source(source_body(args))
    if console.as_json:
        console.json(source)
    else:
        console.print(f"added {source.get('kind')} source {source.get('id')} ({source.get('name')})")
        console.print(f"  sync it: rag-ingest sources sync {source.get('id')} --wait")
    return 0


def list_sources(api: ApiClient, console: Console) -> int:
    sources = api.sources()
    if console.as_json:
        console.json({"sources": sources})
    elif not sources:
        console.print("no sources")
    else:
        for line in source_rows(sources):
            console.print(line)
    return 0


def show_source(api: ApiClient, console: Console, source_id: str) -> int:
    source = api.source(source_id)
    if console.as_json:
        console.json(source)
    else:
        for line in source_lines(source):
            console.print(line)
    return 0


def sync_status(api: ApiClient, console: Console, source_id: str, *, limit: int) -> int:
    syncs = api.syncs(source_id)[:limit]
    if console.as_json:
        console.json({"syncs": syncs})
    elif not syncs:
        console.print(f"{source_id}: never synced (rag-ingest sources sync {source_id})")
    else:
        for sync in syncs:
            for line in sync_lines(sync):
                console.print(line)
    return 0


def start_sync(
    api: ApiClient,
    console: Console,
    source_id: str,
    *,
    wait: bool,
) -> int:
    try:
        sync = api.start_sync(source_id)
    except ApiError as exc:
        if exc.code == "SYNC_IN_PROGRESS":
            raise CliError(
                f"{source_id} is already syncing ({exc.message}): "
                f"follow it with `rag-ingest sources status {source_id}`"
            ) from None
        raise
    if not wait:
        if console.as_json:
            console.json(sync)
        else:
            console.print(f"sync {sync.get('id')} of {source_id} started")
        return 0
    try:
        sync = follow_sync(api, console, source_id, sync)
    except KeyboardInterrupt:
        console.note(
            f"stopped waiting: sync {sync.get('id')} of {source_id} goes on (rag-ingest sources status {source_id})"
        )
        return 130
    if console.as_json:
        console.json(sync)
    else:
        for line in sync_lines(sync):
            console.print(line)
    return 1 if sync.get("status") == "FAILED" else 0


def follow_sync(api: ApiClient, console: Console, source_id: str, sync: dict[str, Any]) -> dict[str, Any]:
    """Read the sync until COMPLETE or FAILED; a line on stderr each time its status or statistics change."""
    shown = ""
    while True:
        line = f"{sync.get('id')} {sync.get('status')}: {statistics_text(sync.get('statistics'))}"
        if line != shown:
            console.note(line)
            shown = line
        if sync.get("status") in SYNC_TERMINAL:
            return sync
        pause(SYNC_POLL_SECONDS)
        sync = api.sync(source_id, str(sync["id"]))


def remove_source(api: ApiClient, console: Console, source_id: str, *, documents: str) -> int:
    api.delete_source(source_id, documents=documents)
    if console.as_json:
        console.json({"id": source_id, "deleted": True, "documents": documents})
    else:
        fate = "deleted with it" if documents == "delete" else "kept"
        console.print(f"deleted source {source_id} (its documents {fate})")
    return 0


def put_item(api: ApiClient, console: Console, args: argparse.Namespace) -> int:
    body = item_body(Path(args.file), parse_meta(args.meta), upload_access(args.readers, args.reader_groups))
    item = api.put_item(args.source_id, args.external_id, body)
    if console.as_json:
        console.json(item)
    else:
        console.print(f"{item.get('external_id')}: {item.get('outcome')} (document {item.get('document_id')})")
    return 0


def delete_item(api: ApiClient, console: Console, source_id: str, external_id: str) -> int:
    api.delete_item(source_id, external_id)
    if console.as_json:
        console.json({"external_id": external_id, "deleted": True})
    else:
        console.print(f"deleted item {external_id} of {source_id}")
    return 0


def run_sources_command(args: argparse.Namespace, api: ApiClient, console: Console) -> int:
    action = args.sources_command
    if action == "add":
        return add_source(api, console, args)
    if action == "ls":
        return list_sources(api, console)
    if action == "show":
        return show_source(api, console, args.source_id)
    if action == "sync":
        return start_sync(api, console, args.source_id, wait=args.wait)
    if action == "status":
        return sync_status(api, console, args.source_id, limit=args.limit)
    if action == "rm":
        return remove_source(api, console, args.source_id, documents=args.documents)
    if action == "put":
        return put_item(api, console, args)
    if action == "delete-item":
        return delete_item(api, console, args.source_id, args.external_id)
    raise AssertionError(f"unknown sources command {action}")


# ---------------------------------------------------------------- the parsers
def _defaults_options(parser: argparse.ArgumentParser, *, name_required: bool = False) -> None:
    """The name, the schedule, and what every document of the source gets: ``--meta`` (typed as
    ``upload --meta``) and its readers."""
    parser.add_argument(
        "--name",
        required=name_required,
        help="the source's name" + ("" if name_required else " (default: its bucket and prefix, or its first host)"),
    )
    parser.add_argument(
        "--schedule",
        type=schedule_expression,
        metavar="EXPR",
        help="sync on a schedule: 'rate(1 day)', 'cron(0 3 * * ? *)'",
    )
    _item_options(parser, "every document of the source")


def _item_options(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--meta", action="append", metavar="KEY=VALUE", help=f"metadata of {what} (repeatable; typed as upload --meta)"
    )
    parser.add_argument(
        "--reader", "--access-user", dest="readers", action="append", metavar="SUB",
        help=f"only this user (a token sub) reads {what}, besides tenant admins (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--reader-group", "--access-group", dest="reader_groups", action="append", metavar="GROUP",
        help=f"members of this group read {what} (repeatable)",
    )  # fmt: skip


def add_sources_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    sources = commands.add_parser(
        "sources", parents=[common], help="documents that live elsewhere (S3, web, custom), kept in sync"
    )
    actions = sources.add_subparsers(dest="sources_command", required=True, metavar="ACTION")

    add = actions.add_parser("add", parents=[common], help="add a source: s3, web or custom")
    kinds = add.add_subparsers(dest="kind", required=True, metavar="KIND")
    s3 = kinds.add_parser("s3", parents=[common], help="a bucket and prefix the stack may read")
    s3.add_argument("--bucket", required=True)
    s3.add_argument("--prefix", help="only keys under this prefix (default: the whole bucket)")
    s3.add_argument(
        "--include", action="append", metavar="GLOB", help="only keys matching (below the prefix; ** crosses folders)"
    )
    s3.add_argument("--exclude", action="append", metavar="GLOB", help="never keys matching (repeatable)")
    _defaults_options(s3)

    web = kinds.add_parser("web", parents=[common], help="a web site: seed URLs and sitemaps")
    web.add_argument("--seed", dest="seeds", action="append", metavar="URL", help="a page to start from (repeatable)")
    web.add_argument(
        "--sitemap", dest="sitemaps", action="append", metavar="URL", help="a sitemap or sitemap index (repeatable)"
    )
    web.add_argument("--scope-host", help="the host crawled (default: the first seed's)")
    web.add_argument("--scope-prefix", help="the path prefix crawled (default: the first seed's folder)")
    web.add_argument("--max-pages", type=positive_int, metavar="N", help="default 1,000")
    web.add_argument("--max-depth", type=positive_int, metavar="N", help="links from a seed, default 5")
    web.add_argument("--max-page-bytes", type=positive_int, metavar="N", help="default 10 MB")
    web.add_argument("--requests-per-second", type=positive_number, metavar="R", help="per host, default 2")
    web.add_argument("--concurrency", type=positive_int, metavar="N", help="per host, default 2")
    web.add_argument(
        "--tracking-parameter", dest="tracking_parameters", action="append", metavar="KEY",
        help="a query key dropped from URLs (repeatable; replaces the defaults utm_*, fbclid, ...)",
    )  # fmt: skip
    _defaults_options(web)

    custom = kinds.add_parser("custom", parents=[common], help="items your own system pushes (sources put)")
    _defaults_options(custom, name_required=True)

    actions.add_parser("ls", parents=[common], help="the tenant's sources with their last sync")
    show = actions.add_parser("show", parents=[common], help="one source: what it reads, its defaults, its last sync")
    show.add_argument("source_id", metavar="ID")
    sync = actions.add_parser("sync", parents=[common], help="start a sync (--wait: follow it to the end)")
    sync.add_argument("source_id", metavar="ID")
    sync.add_argument(
        "--wait", action="store_true", help="follow it until COMPLETE or FAILED (Ctrl-C stops waiting only)"
    )
    status = actions.add_parser("status", parents=[common], help="the latest syncs: statistics and failed items")
    status.add_argument("source_id", metavar="ID")
    status.add_argument("--limit", type=positive_int, default=3, help="syncs shown, newest first (default 3)")
    rm = actions.add_parser("rm", parents=[common], help="delete a source (--documents: delete or keep its documents)")
    rm.add_argument("source_id", metavar="ID")
    rm.add_argument("--documents", choices=("delete", "keep"), required=True, help="what becomes of its documents")
    put = actions.add_parser("put", parents=[common], help="custom source: upsert the document of one item")
    put.add_argument("source_id", metavar="ID")
    put.add_argument("external_id", metavar="EXTERNAL_ID")
    put.add_argument("file", metavar="FILE")
    _item_options(put, "this item")
    delete = actions.add_parser("delete-item", parents=[common], help="custom source: remove one item's document")
    delete.add_argument("source_id", metavar="ID")
    delete.add_argument("external_id", metavar="EXTERNAL_ID")

"""The user commands but upload and sources: login, logout, ls, status, search, ask, retry, meta, access,
rm; the parsers of all of them (``sources``: its module's), and the dispatch."""

from __future__ import annotations

import argparse
import json
import re
import time
from typing import Any

from rag_ingest_client.cli.api import POLL_SECONDS, TERMINAL, ApiClient
from rag_ingest_client.cli.console import Console
from rag_ingest_client.cli.errors import CliError
from rag_ingest_client.cli.filters import build_filter, parse_meta
from rag_ingest_client.cli.progress import status_text
from rag_ingest_client.cli.signin import CognitoSignIn, LocalSignIn
from rag_ingest_client.cli.sources import add_sources_commands, run_sources_command
from rag_ingest_client.cli.targets import Target
from rag_ingest_client.cli.upload import upload, upload_access
from rag_ingest_client.http import ApiError, search_body
from rag_ingest_client.sentences import sentence


# ---------------------------------------------------------------- login
def login(target: Target, console: Console, *, open_browser: Any = None) -> int:
    tokens = target.tokens
    if isinstance(tokens, LocalSignIn):
        tokens.sign_in()
        who: dict[str, Any] = {"username": tokens.username, "tenant_id": tokens.tenant_id}
    elif isinstance(tokens, CognitoSignIn):
        entry = tokens.login(announce=console.note, **({"open_browser": open_browser} if open_browser else {}))
        who = {"username": entry.get("username"), "tenant_id": entry.get("tenant_id")}
    else:  # pragma: no cover - every target has one of the two
        raise CliError("this target has no sign-in")
    if console.as_json:
        console.json({"target": target.label, **who})
    else:
        console.print(f"signed in to {target.label} as {who['username']} (tenant {who['tenant_id']})")
    if not who["tenant_id"]:
        console.note("warning: the token carries no custom:tenant_id: the API will answer 403 until an admin sets it")
    return 0


def logout(target: Target, console: Console) -> int:
    target.tokens.forget()
    console.print(f"signed out of {target.label}")
    return 0


# ---------------------------------------------------------------- ls, status
def list_documents(
    api: ApiClient,
    console: Console,
    *,
    limit: int,
    cursor: str | None,
    everything: bool,
    where: dict[str, Any] | None = None,
) -> int:
    items: list[dict[str, Any]] = []
    while True:
        page = api.documents(limit=limit, cursor=cursor, where=where)
        items.extend(page.get("items") or [])
        cursor = page.get("next_cursor")
        if not everything or not cursor:
            break
    if console.as_json:
        console.json({"items": items, "next_cursor": cursor})
        return 0
    if not items:
        console.print("no documents")
    else:
        rows = [("ID", "STATUS", "PAGES", "CHUNKS", "CREATED", "FILENAME")]
        rows += [
            (
                d["document_id"],
                status_text(d) if d.get("status") not in ("READY",) else "READY",
                str(d.get("page_count") if d.get("page_count") is not None else "-"),
                str(d.get("chunk_count") if d.get("chunk_count") is not None else "-"),
                str(d.get("created_at", ""))[:19],
                str(d.get("filename") or ""),
            )
            for d in items
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
        for row in rows:
            console.print(
                "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[-1]
            )
    if cursor:
        console.print(f"more: rag-ingest ls --cursor {cursor}  (or --all)")
    return 0


def show_status(api: ApiClient, console: Console, document_id: str) -> int:
    document = api.document(document_id)
    if console.as_json:
        console.json(document)
        return 0
    console.print(f"{document['document_id']}  {document.get('filename') or ''}")
    console.print(f"  status   {status_text(document)}")
    if document.get("status") == "FAILED":
        console.print(f"  error    {document.get('error_code')}: {sentence(document.get('error_code'))}")
        if document.get("error_detail"):
            console.print(f"  detail   {document['error_detail']}")
    if document.get("failed_pages"):
        console.print(f"  failed pages {', '.join(map(str, document['failed_pages']))}")
    console.print(f"  created  {document.get('created_at')}   updated {document.get('updated_at')}")
    timings = document.get("timings_ms") or {}
    if timings:
        console.print("  timings  " + ", ".join(f"{stage} {ms / 1000:.2f}s" for stage, ms in timings.items()))
    return 0


# ---------------------------------------------------------------- search
def search(
    api: ApiClient,
    console: Console,
    query: str,
    *,
    k: int,
    mode: str,
    where: dict[str, Any] | None = None,
    rerank: bool | None = None,
    expand: str | None = None,
) -> int:
    result = api.search(query, k=k, mode=mode, where=where, rerank=rerank, expand=expand)
    if console.as_json:
        console.json(result)
        return 0
    passages = result.get("passages") or []
    if not passages:
        console.print(f"no passages for {query!r}")
        return 0
    emphasis = ("\x1b[1m", "\x1b[0m") if console.out.isatty() else ("*", "*")
    for rank, passage in enumerate(passages, 1):
        console.print(
            f"{rank}. {passage.get('filename') or passage.get('document_id')} {_where(passage)}  "
            f"score {float(passage.get('score', 0)):.3f}  ({passage['document_id']})"
        )
        highlight = (passage.get("highlights") or [None])[0]
        text = _plain_highlight(highlight, emphasis) if highlight else _snippet(str(passage.get("text", "")))
        console.print(f"   {text}")
    return 0


def ask(
    api: ApiClient,
    console: Console,
    query: str,
    *,
    k: int,
    mode: str,
    where: dict[str, Any] | None = None,
    rerank: bool | None = None,
    expand: str | None = None,
    stream: bool = True,
) -> int:
    """``rag-ingest ask``: the answer (streamed over the live channel when the target has one), then
    each cited passage under its number."""
    result: dict[str, Any] | None = None
    live_url = api.target.live_url
    if stream and live_url and not console.as_json:
        from rag_ingest_client.cli.stream import LiveUnavailable, stream_answer

        request = search_body(query, k=k, mode=mode, filter=where, rerank=rerank, expand=expand)
        try:
            result = stream_answer(live_url, api.target.tokens.token(), request, console.write)
        except LiveUnavailable as exc:
            console.note(f"(the live channel is unavailable: {exc}; asking over HTTP)")
        else:
            console.print()  # the line the streamed text ends
    if result is None:
        result = api.answer(query, k=k, mode=mode, where=where, rerank=rerank, expand=expand)
        if console.as_json:
            console.json(result)
            return 0
        console.print(result.get("answer") or "")
    for citation in result.get("citations") or []:
        passage = citation["passage"]
        console.print(
            f"[{citation['number']}] {passage.get('filename') or passage.get('document_id')} {_where(passage)}  "
            f"({passage['document_id']})"
        )
    if result.get("stand_in"):
        console.print(f"(answered by {result['stand_in']})")
    return 0


def _where(passage: dict[str, Any]) -> str:
    """Where a passage stands: ``p.3`` (PDF pages), ``slide 2`` (PPTX), ``Budget!A12:F40`` (XLSX, CSV),
    ``§ Heading > Sub ¶2`` (others)."""
    if passage.get("cell_range"):
        return str(passage["cell_range"])
    start, end = passage.get("page_start"), passage.get("page_end")
    span = f"{start}-{end}" if end not in (None, start) else f"{start}"
    document_format = passage.get("document_format") or "pdf"
    if document_format == "pdf":
        return f"p.{span}"
    if document_format == "pptx":
        return f"slide {span}" if "-" not in span else f"slides {span}"
    section = " > ".join(passage.get("heading_path") or []) or "top"
    paragraph = passage.get("paragraph_index")
    return f"§ {section}" + (f" ¶{paragraph}" if paragraph else "")


def _plain_highlight(fragment: str, emphasis: tuple[str, str]) -> str:
    import html

    marked = fragment.replace("<em>", "\x00").replace("</em>", "\x01")
    text = html.unescape(re.sub(r"<[^>]+>", "", marked))
    return " ".join(text.replace("\x00", emphasis[0]).replace("\x01", emphasis[1]).split())


def _snippet(text: str, limit: int = 240) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---------------------------------------------------------------- retry, rm
def retry(api: ApiClient, console: Console, document_id: str, *, wait: bool, timeout_seconds: float) -> int:
    try:
        document = api.retry(document_id)
    except ApiError as exc:
        if exc.status == 409:
            raise CliError(f"{document_id} cannot be retried: {exc.message}") from None
        raise
    if not wait:
        console.json(document) if console.as_json else console.print(f"retrying {document_id}: {status_text(document)}")
        return 0
    deadline = time.monotonic() + timeout_seconds
    while document.get("status") not in TERMINAL and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
        document = api.document(document_id)
    if console.as_json:
        console.json(document)
    else:
        console.print(f"{document_id}: {status_text(document)}")
        if document.get("status") == "FAILED":
            console.print(f"  {sentence(document.get('error_code'))} {document.get('error_detail') or ''}".rstrip())
    return 0 if document.get("status") == "READY" else 1


# ---------------------------------------------------------------- meta
#: A ``meta set``/``unset`` that lost to a concurrent change (412) reads the document again this often.
META_ATTEMPTS = 3


def change_metadata(
    api: ApiClient,
    console: Console,
    document_id: str,
    *,
    action: str,
    pairs: list[str],
) -> int:
    """``meta show|set|unset|clear``: ``set`` merges ``k=v`` pairs (typed as ``upload --meta`` types
    them) into the current metadata, ``unset`` drops keys, ``clear`` empties it. Each is a read, then a
    PATCH with If-Match on the revision read: a concurrent change is read again, never overwritten."""
    for _ in range(META_ATTEMPTS):
        document = api.document(document_id)
        current: dict[str, Any] = dict(document.get("metadata") or {})
        if action == "show":
            console.json(current) if console.as_json else _print_metadata(console, document_id, current)
            return 0
        if action == "set":
            if not pairs:
                raise CliError("meta set needs KEY=VALUE pairs")
            wanted = {**current, **(parse_meta(pairs) or {})}
        elif action == "unset":
            if not pairs:
                raise CliError("meta unset needs the KEYs to remove")
            wanted = {key: value for key, value in current.items() if key not in pairs}
        else:  # clear
            wanted = {}
        try:
            updated = api.update_metadata(document_id, wanted, revision=int(document.get("revision") or 1))
        except ApiError as exc:
            if exc.status in (409, 412) and "REINDEX_UNAVAILABLE" not in exc.message:
                continue  # changed meanwhile: read it again
            raise
        if console.as_json:
            console.json(updated)
        else:
            _print_metadata(console, document_id, dict(updated.get("metadata") or {}))
            console.print(f"  revision {updated.get('revision')}")
        return 0
    raise CliError(f"{document_id} kept changing; try again")


def change_access(
    api: ApiClient,
    console: Console,
    document_id: str,
    *,
    action: str,
    users: list[str] | None,
    groups: list[str] | None,
    editors: dict[str, list[str]] | None = None,
    deny: dict[str, list[str]] | None = None,
) -> int:
    """``access show|set|open``: ``set`` replaces who reads the document (``--access-user``/``--access-group``),
    ``open`` gives it back to the whole tenant; the editors and deny lists are replaced when given
    (``--editor-*``, ``--deny-*``), else kept. A read, then a PATCH with If-Match on the revision
    read (a concurrent change is read again). Only the uploader or a tenant admin may change it."""
    for _ in range(META_ATTEMPTS):
        document = api.document(document_id)
        if action == "show":
            shown = {"access": document.get("access"), "uploaded_by": document.get("uploaded_by")}
            console.json(shown) if console.as_json else _print_access(console, document_id, document)
            return 0
        before = document.get("access") or {}
        wanted: dict[str, Any]
        if action == "set":
            readers = upload_access(users, groups)
            if readers is None and editors is None and deny is None:
                raise CliError(
                    "access set needs --access-user, --access-group, --editor-* or --deny-* "
                    "(access open: the whole tenant)"
                )
            wanted = readers or {"users": before.get("users") or [], "groups": before.get("groups") or []}
        else:  # open
            wanted = {"users": [], "groups": []}
        lists: dict[str, Any] = {}
        for name, given in (("editors", editors), ("deny", deny)):
            kept = before.get(name)
            if given is not None or kept:
                lists[name] = given if given is not None else kept
        try:
            body = {**wanted, **lists}
            updated = api.update_access(document_id, body, revision=int(document.get("revision") or 1))
        except ApiError as exc:
            if exc.status == 412:
                continue  # changed meanwhile: read it again
            raise
        console.json(updated) if console.as_json else _print_access(console, document_id, updated)
        return 0
    raise CliError(f"{document_id} kept changing; try again")


def _print_access(console: Console, document_id: str, document: dict[str, Any]) -> None:
    access = document.get("access") or {}
    users, groups = access.get("users") or [], access.get("groups") or []
    console.print(f"{document_id}: uploaded by {document.get('uploaded_by') or '(straight to S3)'}")
    if not users and not groups:
        console.print("  open to the whole tenant")
    else:
        console.print(f"  users: {', '.join(users) or '-'}")
        console.print(f"  groups: {', '.join(groups) or '-'}")
    for name, label in (("editors", "editors"), ("deny", "denied")):
        listed = access.get(name) or {}
        names = [f"user {user}" for user in listed.get("users") or []]
        names += [f"group {group}" for group in listed.get("groups") or []]
        if names:
            console.print(f"  {label}: {', '.join(names)}")


def _print_metadata(console: Console, document_id: str, metadata: dict[str, Any]) -> None:
    console.print(f"{document_id} metadata" + ("" if metadata else ": none"))
    for key, value in sorted(metadata.items()):
        console.print(f"  {key} = {json.dumps(value, ensure_ascii=False)}")


def remove(api: ApiClient, console: Console, document_id: str) -> int:
    answer = api.delete(document_id)
    if console.as_json:
        console.json(answer)
    else:
        console.print(f"deleted {document_id}" + (f" ({answer['status']})" if answer.get("status") else ""))
    return 0


def add_user_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """The user commands' parsers; ``common`` carries the target options so they also work after the command."""
    commands.add_parser("login", parents=[common], help="sign in (local: --user/--tenant; --stack: in the browser)")
    commands.add_parser("logout", parents=[common], help="forget the cached tokens of the target")

    upload_parser = commands.add_parser(
        "upload", parents=[common], help="upload documents (files or folders) and follow them"
    )
    upload_parser.add_argument("paths", nargs="+", metavar="FILE|DIR")
    upload_parser.add_argument("--no-wait", dest="wait", action="store_false", help="return once the bytes are sent")
    upload_parser.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for READY (default 900)")
    upload_parser.add_argument(
        "--meta",
        action="append",
        metavar="KEY=VALUE",
        help="metadata of every file (repeatable; 2024 and 0.5 are numbers, true/false booleans, "
        "the same key again makes a list)",
    )
    upload_parser.add_argument(
        "--access-user",
        action="append",
        metavar="SUB",
        help="only this user (a token sub) reads the files, besides you and tenant admins (repeatable)",
    )
    upload_parser.add_argument(
        "--access-group",
        action="append",
        metavar="GROUP",
        help="members of this group read the files, besides you and tenant admins (repeatable)",
    )

    ls = commands.add_parser("ls", parents=[common], help="the tenant's documents, newest first")
    ls.add_argument("--limit", type=int, default=20, help="documents per page (default 20)")
    ls.add_argument("--cursor", help="the next_cursor of a previous page")
    ls.add_argument("--all", dest="everything", action="store_true", help="follow every page")
    _filter_options(ls)

    status = commands.add_parser("status", parents=[common], help="one document's status, stage, progress and error")
    status.add_argument("document_id", metavar="ID")

    search_parser = commands.add_parser("search", parents=[common], help="search the tenant's passages")
    search_parser.add_argument("query")
    search_parser.add_argument("-k", type=int, default=5, help="passages (1..50, default 5)")
    _retrieval_options(search_parser, rerank_default="the deployment's default")
    _filter_options(search_parser)

    ask_parser = commands.add_parser("ask", parents=[common], help="a cited answer from the tenant's documents")
    ask_parser.add_argument("query", metavar="QUESTION")
    ask_parser.add_argument("-k", type=int, default=5, help="passages the model reads (1..20, default 5)")
    _retrieval_options(ask_parser, rerank_default="the deployment's answer default")
    ask_parser.add_argument(
        "--no-stream",
        dest="stream",
        action="store_false",
        help="wait for the whole answer (POST /answer) instead of streaming it over the live channel",
    )
    _filter_options(ask_parser)

    retry_parser = commands.add_parser("retry", parents=[common], help="replay a FAILED document")
    retry_parser.add_argument("document_id", metavar="ID")
    retry_parser.add_argument("--wait", action="store_true", help="wait until READY or FAILED")
    retry_parser.add_argument("--timeout", type=float, default=900.0)

    meta = commands.add_parser(
        "meta",
        parents=[common],
        help="show or change a document's metadata (set k=v merges, unset k drops, clear empties)",
    )
    meta.add_argument("action", choices=("show", "set", "unset", "clear"))
    meta.add_argument("document_id", metavar="ID")
    meta.add_argument("pairs", nargs="*", metavar="KEY=VALUE|KEY", help="set: KEY=VALUE pairs; unset: KEYs")

    access = commands.add_parser(
        "access",
        parents=[common],
        help="show or change who reads a document (set --user/--group replaces, open: the whole tenant)",
    )
    access.add_argument("action", choices=("show", "set", "open"))
    access.add_argument("document_id", metavar="ID")
    access.add_argument(
        "--access-user", action="append", metavar="SUB", help="set: a user (token sub) who reads it; repeatable"
    )
    access.add_argument("--access-group", action="append", metavar="GROUP", help="set: a group; repeatable")
    for role, what in (("editor", "may also change, retry or delete it"), ("deny", "may neither read nor change it")):
        access.add_argument(
            f"--{role}-user", action="append", metavar="SUB", help=f"set: a user who {what}; repeatable"
        )
        access.add_argument(
            f"--{role}-group", action="append", metavar="GROUP", help=f"set: a group whose members {what}; repeatable"
        )

    commands.add_parser(
        "mcp",
        parents=[common],
        help="serve the tenant's documents to an MCP client over stdio, as the signed-in user (docs/mcp.md)",
    )
    rm = commands.add_parser("rm", parents=[common], help="delete a document and its passages")
    rm.add_argument("document_id", metavar="ID")

    add_sources_commands(commands, common)


def _retrieval_options(parser: argparse.ArgumentParser, *, rerank_default: str) -> None:
    """--mode, --rerank and --expand, as POST /search and POST /answer take them."""
    parser.add_argument("--mode", choices=("hybrid", "knn", "bm25"), default="hybrid")
    parser.add_argument(
        "--rerank",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"rerank the candidates (--no-rerank: not); unset, {rerank_default}",
    )
    parser.add_argument(
        "--expand",
        choices=("none", "section", "page"),
        default=None,
        help="return each passage's section or page, passages sharing one merged (unset: the API's default)",
    )


def _filter_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--where", action="append", metavar="KEY=VALUE", help="only where KEY equals VALUE (repeatable: all of them)"
    )
    parser.add_argument(
        "--filter-json", metavar="JSON|@FILE", help="a RetrievalFilter as JSON, or @file holding one (docs/api.md)"
    )


def run_user_command(args: argparse.Namespace, target: Target, console: Console) -> int:
    api = ApiClient(target)
    if args.command == "login":
        return login(target, console)
    if args.command == "logout":
        return logout(target, console)
    if args.command == "upload":
        metadata = parse_meta(args.meta)
        access = upload_access(args.access_user, args.access_group)
        return upload(
            api, console, args.paths, wait=args.wait, timeout_seconds=args.timeout, metadata=metadata, access=access
        )
    if args.command == "ls":
        where = build_filter(args.where, args.filter_json)
        return list_documents(
            api, console, limit=args.limit, cursor=args.cursor, everything=args.everything, where=where
        )
    if args.command == "status":
        return show_status(api, console, args.document_id)
    if args.command == "search":
        where = build_filter(args.where, args.filter_json)
        return search(
            api, console, args.query, k=args.k, mode=args.mode, where=where, rerank=args.rerank, expand=args.expand
        )
    if args.command == "ask":
        where = build_filter(args.where, args.filter_json)
        return ask(
            api,
            console,
            args.query,
            k=args.k,
            mode=args.mode,
            where=where,
            rerank=args.rerank,
            expand=args.expand,
            stream=args.stream,
        )
    if args.command == "retry":
        return retry(api, console, args.document_id, wait=args.wait, timeout_seconds=args.timeout)
    if args.command == "meta":
        return change_metadata(api, console, args.document_id, action=args.action, pairs=args.pairs)
    if args.command == "access":
        return change_access(
            api,
            console,
            args.document_id,
            action=args.action,
            users=args.access_user,
            groups=args.access_group,
            editors=upload_access(args.editor_user, args.editor_group),
            deny=upload_access(args.deny_user, args.deny_group),
        )
    if args.command == "rm":
        return remove(api, console, args.document_id)
    if args.command == "sources":
        return run_sources_command(args, api, console)
    if args.command == "mcp":
        return serve_mcp(api)
    raise AssertionError(f"unknown command {args.command}")


def serve_mcp(api: ApiClient) -> int:
    """``rag-ingest mcp``: the MCP server over stdio (the client's ``mcp`` extra)."""
    try:
        from rag_ingest_client.mcp_server import serve_stdio
    except ImportError as exc:
        raise CliError(f'the MCP server needs the mcp package: pip install "rag-ingest-client[mcp]" ({exc})') from None
    return serve_stdio(api)

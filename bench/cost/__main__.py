"""make cost: the AWS cost per 1,000 pages from a measured local-stack run and cdk.json.

Without ``--measure`` it reads the last measurement (``bench/results/cost-measurement.json``) and
measures only when there is none; ``--measure`` always runs the local stack again. Then the monthly
bill of a 10,000,000-chunk store per vector setting (``bench.cost.vector_store``, from ``--vectors``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench.cost.report import ASSUMED_BEDROCK_CALL_MS, render, render_prices
from bench.cost.vector_store import VECTOR_MEASUREMENT, render_store
from infra.config import CONTEXT_KEY, parse_config

RESULTS = Path("bench/results")
MEASUREMENT = RESULTS / "cost-measurement.json"
CDK_JSON = Path("cdk.json")
DEFAULT_PDFS = ("samples/*.pdf", "bench/corpus/*.pdf")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--measure", action="store_true", help="run the local stack again even if a measurement exists")
    parser.add_argument("--measurement", type=Path, default=MEASUREMENT, help="the measurement JSON to read or write")
    parser.add_argument("--pdf", action="append", help=f"PDFs to measure with (glob; default {' '.join(DEFAULT_PDFS)})")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument(
        "--bedrock-call-ms", type=float, default=ASSUMED_BEDROCK_CALL_MS, help="assumed Titan V2 InvokeModel latency"
    )
    parser.add_argument("--prices", action="store_true", help="also print every price with its source")
    parser.add_argument(
        "--vectors", type=Path, default=VECTOR_MEASUREMENT, help="make bench-vectors's report (the 10M-chunk store)"
    )
    args = parser.parse_args(argv)
    if args.measure or not args.measurement.is_file():
        from bench.cost.measure import measure

        pdfs = sorted({path for pattern in (args.pdf or DEFAULT_PDFS) for path in Path().glob(pattern)})
        if not pdfs:
            raise SystemExit(f"no PDF matches {args.pdf or DEFAULT_PDFS}")
        data = measure(pdfs, timeout=args.timeout)
        args.measurement.parent.mkdir(parents=True, exist_ok=True)
        args.measurement.write_text(json.dumps(data, indent=1) + "\n")
        print(f"measurement written to {args.measurement}\n")
    data = json.loads(args.measurement.read_text())
    # cdk.json read directly: infra.cdk_app would start a jsii kernel just to read a file.
    config = parse_config(json.loads(CDK_JSON.read_text()).get("context", {}).get(CONTEXT_KEY))
    print(render(data, config, call_ms=args.bedrock_call_ms))
    print()
    print("\n".join(render_store(args.vectors)))
    if args.prices:
        print()
        print(render_prices())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

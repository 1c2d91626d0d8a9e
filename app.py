#!/usr/bin/env python3
"""CDK entry point (cdk.json: ``python3 app.py``).

Builds the App and the stack from the ``rag-ingest`` context of cdk.json, registers the cdk-nag
AwsSolutions checks (``Validations.of(app).add_plugins``) and synthesizes. Offline synth:
``CDK_OUTDIR=cdk.out .venv/bin/python app.py`` (build the layer first: ``make layer``).
"""

from infra.cdk_app import create_app


def main() -> None:
    app, _stack, _config = create_app()
    app.synth()


if __name__ == "__main__":
    main()

"""boto3 clients for moto's server, as the local runtime itself uses them."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config

from local.runtime.settings import LOCAL_CREDENTIALS, RuntimeSettings


def moto_client(settings: RuntimeSettings, service: str, *, read_timeout: float = 60.0) -> Any:
    """A client of moto's server (retries off: a failure here is a bug to see, not to hide)."""
    return boto3.session.Session(
        aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        aws_session_token=LOCAL_CREDENTIALS["AWS_SESSION_TOKEN"],
        region_name=settings.region,
    ).client(
        service,
        endpoint_url=settings.moto_endpoint,
        config=Config(
            retries={"max_attempts": 1, "mode": "standard"},
            read_timeout=read_timeout,
            connect_timeout=5,
            max_pool_connections=32,
        ),
    )

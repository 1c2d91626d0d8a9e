"""The deployed smoke test's sign-in (``rag-ingest smoke --stack NAME``): the stack's outputs, then a
test user with a tenant and a random permanent password through Cognito's admin API, signed in with
``ADMIN_USER_PASSWORD_AUTH``. The steps after it are the CLI's (``rag_ingest_client.cli.smoke``)."""

from __future__ import annotations

from collections.abc import Callable

from rag_ingest.adapters.stack_resources import stack_outputs
from rag_ingest.adapters.user_pool import UserPoolAdmin, strong_password

from rag_ingest_client.cli.errors import CliError
from rag_ingest_client.cli.smoke import SmokeRun, StaticToken
from rag_ingest_client.cli.targets import Target


def deployed_sign_in(
    stack_name: str, region: str | None, *, username: str, tenant_id: str, email: str | None
) -> Callable[[SmokeRun], Target]:
    """The steps that find the stack and sign the smoke user in with Cognito's admin API."""

    def sign_in(run: SmokeRun) -> Target:
        with run.step("stack outputs") as info:
            outputs, region_name = stack_outputs(stack_name, region)
            missing = [k for k in ("ApiUrl", "UserPoolId", "UserPoolClientId") if not outputs.get(k)]
            if missing:
                raise CliError(f"stack {stack_name} has no output {', '.join(missing)}")
            info["detail"] = outputs["ApiUrl"]
        admin = UserPoolAdmin.connect(outputs["UserPoolId"], outputs["UserPoolClientId"], region_name)
        password = strong_password()
        with run.step("test user") as info:
            created = admin.ensure_user(username, email or f"{username}@example.com", tenant_id)
            admin.set_permanent_password(username, password)
            info["detail"] = f"{'created' if created else 'reused'} {username} (tenant {tenant_id})"
        with run.step("sign in") as info:
            token = admin.id_token(username, password)
            info["detail"] = "ID token (ADMIN_USER_PASSWORD_AUTH)"
        return Target(f"stack {stack_name}", outputs["ApiUrl"].rstrip("/"), StaticToken(token), "rag-ingest smoke")

    return sign_in

"""The page in AWS: a private S3 bucket behind CloudFront (Origin Access Control, HTTPS only).

Every response gets security headers (HSTS, a Content-Security-Policy that lets the page talk only
to its origin, the API, the WebSocket API, the documents bucket and the Cognito domain, and more);
``web/`` is deployed with a generated ``config.json`` and the cache invalidated on each deploy. Two
phases because of the stack's references: the distribution first (the API's CORS origins and the
user-pool client's callback URL need its URL), then :meth:`WebHosting.publish` once the API,
WebSocket and Cognito values exist; the CSP is completed by :meth:`WebHosting.allow_connections_to`.
The headers and the CSP's reference cycle: docs/deploy.md, "The page and live status".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jsii
from aws_cdk import Aws, CfnOutput, DefaultStackSynthesizer, Duration, IStableStringProducer, Lazy, Stack
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_cloudfront_origins as origins
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from constructs import Construct

from infra.config import RagIngestConfig
from infra.constructs.function import new_log_group, removal_policy
from infra.nag import acknowledge, arn_ref, pseudo_spelling
from infra.naming import account_global_name
from infra.paths import ROOT

WEB_DIR = ROOT / "web"
CONFIG_OBJECT = "config.json"
COGNITO_SCOPES = ("openid", "email", "profile")
HSTS_MAX_AGE = Duration.days(730)
_PRICE_CLASSES = {
    "PriceClass_100": cloudfront.PriceClass.PRICE_CLASS_100,
    "PriceClass_200": cloudfront.PriceClass.PRICE_CLASS_200,
    "PriceClass_All": cloudfront.PriceClass.PRICE_CLASS_ALL,
}


class WebHosting(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: RagIngestConfig, access_logs_bucket: s3.IBucket
    ) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        hosting = config.hosting
        self._connect_sources: list[str] = []
        self._form_actions: list[str] = []

        self.bucket = s3.Bucket(
            self,
            "Bucket",
            versioned=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=access_logs_bucket,
            server_access_logs_prefix="web-bucket/",
            lifecycle_rules=[
                # Every deploy replaces the files; old versions only matter for a quick rollback.
                s3.LifecycleRule(id="expire-noncurrent-site-files", noncurrent_version_expiration=Duration.days(30))
            ],
            removal_policy=removal_policy(config),
        )
        # CloudFront's standard logs are delivered with S3 ACLs, so this bucket needs them enabled
        # (the log-delivery canned ACL); it is private and TLS-only like the others.
        self.logs_bucket = s3.Bucket(
            self,
            "CloudFrontLogsBucket",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_PREFERRED,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-cloudfront-logs", expiration=Duration.days(hosting.cloudfront_logs_expiration_days)
                )
            ],
            removal_policy=removal_policy(config),
        )
        acknowledge(
            self.logs_bucket,
            "AwsSolutions-S1",
            "This is the CloudFront standard-log target of the page's distribution; logging it would log the logs.",
        )

        self.headers_policy = cloudfront.ResponseHeadersPolicy(
            self,
            "SecurityHeaders",
            response_headers_policy_name=account_global_name(config.stack_name, "headers"),
            comment="rag-ingest page: security headers",
            security_headers_behavior=cloudfront.ResponseSecurityHeadersBehavior(
                content_security_policy=cloudfront.ResponseHeadersContentSecurityPolicy(
                    content_security_policy=Lazy.string(_Producer(self.content_security_policy)),
                    override=True,
                ),
                strict_transport_security=cloudfront.ResponseHeadersStrictTransportSecurity(
                    access_control_max_age=HSTS_MAX_AGE, include_subdomains=True, override=True
                ),
                content_type_options=cloudfront.ResponseHeadersContentTypeOptions(override=True),
                frame_options=cloudfront.ResponseHeadersFrameOptions(
                    frame_option=cloudfront.HeadersFrameOption.DENY, override=True
                ),
                referrer_policy=cloudfront.ResponseHeadersReferrerPolicy(
                    referrer_policy=cloudfront.HeadersReferrerPolicy.STRICT_ORIGIN_WHEN_CROSS_ORIGIN, override=True
                ),
            ),
            custom_headers_behavior=cloudfront.ResponseCustomHeadersBehavior(
                custom_headers=[
                    cloudfront.ResponseCustomHeader(
                        header="Permissions-Policy",
                        value="camera=(), microphone=(), geolocation=(), payment=(), usb=()",
                        override=True,
                    ),
                    cloudfront.ResponseCustomHeader(
                        header="Cross-Origin-Opener-Policy", value="same-origin", override=True
                    ),
                ]
            ),
        )

        certificate = (
            acm.Certificate.from_certificate_arn(self, "Certificate", hosting.certificate_arn)
            if hosting.certificate_arn
            else None
        )
        # Any path the bucket does not have is the page's own route: answer index.html (SPA).
        # Without ListBucket (OAC reads objects only) S3 answers a missing key with 403, not 404.
        spa_fallback = [
            cloudfront.ErrorResponse(
                http_status=status, response_http_status=200, response_page_path="/index.html", ttl=Duration.seconds(0)
            )
            for status in (403, 404)
        ]
        self.distribution = cloudfront.Distribution(
            self,
            "Distribution",
            comment="rag-ingest page",
            default_behavior=cloudfront.BehaviorOptions(
                origin=origins.S3BucketOrigin.with_origin_access_control(
                    self.bucket,
                    origin_access_control=cloudfront.S3OriginAccessControl(
                        self,
                        "OriginAccessControl",
                        origin_access_control_name=account_global_name(config.stack_name, "oac"),
                        description="rag-ingest page: CloudFront reads the private page bucket",
                    ),
                ),
                viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
                allowed_methods=cloudfront.AllowedMethods.ALLOW_GET_HEAD,
                cache_policy=cloudfront.CachePolicy.CACHING_OPTIMIZED,
                response_headers_policy=self.headers_policy,
                compress=True,
            ),
            default_root_object="index.html",
            error_responses=spa_fallback,
            http_version=cloudfront.HttpVersion.HTTP2_AND_3,
            price_class=_PRICE_CLASSES[hosting.price_class],
            domain_names=[hosting.domain_name] if hosting.domain_name else None,
            certificate=certificate,
            # Only a custom certificate lets the viewer TLS policy be chosen (CFR4 below otherwise).
            minimum_protocol_version=cloudfront.SecurityPolicyProtocol.TLS_V1_2_2021 if certificate else None,
            enable_logging=True,
            log_bucket=self.logs_bucket,
            log_file_prefix="cloudfront/",
        )
        self._acknowledge_distribution()

        domain = hosting.domain_name or self.distribution.distribution_domain_name
        self.url = f"https://{domain}"
        CfnOutput(self, "WebUrl", value=self.url).override_logical_id("WebUrl")

    @property
    def has_custom_domain(self) -> bool:
        """With a custom domain the page's origin is a literal, known before anything is created."""
        return self._config.hosting.domain_name is not None

    def allow_connections_to(self, *sources: str) -> None:
        """Origins the page may fetch from or open sockets to (CSP ``connect-src``)."""
        self._connect_sources.extend(source for source in sources if source not in self._connect_sources)

    def allow_form_actions_to(self, *targets: str) -> None:
        self._form_actions.extend(target for target in targets if target not in self._form_actions)

    def content_security_policy(self) -> str:
        connect = " ".join(["'self'", *self._connect_sources])
        form = " ".join(["'self'", *self._form_actions])
        return "; ".join(
            [
                "default-src 'none'",
                "script-src 'self'",
                "style-src 'self'",
                "img-src 'self' data:",
                "font-src 'self'",
                "manifest-src 'self'",
                f"connect-src {connect}",
                f"form-action {form}",
                "frame-ancestors 'none'",
                "base-uri 'self'",
                "object-src 'none'",
                "upgrade-insecure-requests",
            ]
        )

    def publish(
        self,
        *,
        api_url: str,
        websocket_url: str,
        cognito_domain_url: str,
        client_id: str,
        max_upload_bytes: int,
    ) -> s3deploy.BucketDeployment:
        """Deploys ``web/`` and ``config.json`` (the page-config contract, AWS shape) and invalidates the cache."""
        page_config: dict[str, Any] = {
            "apiUrl": api_url,
            "maxUploadBytes": max_upload_bytes,
            "live": {"kind": "websocket", "url": websocket_url},
            "auth": {
                "kind": "cognito",
                "domain": cognito_domain_url,
                "clientId": client_id,
                "redirectUri": f"{self.url}/",
                "logoutUri": f"{self.url}/",
                "scopes": list(COGNITO_SCOPES),
            },
        }
        log_group = new_log_group(self, "DeploymentLogs", self._config)
        deployment = s3deploy.BucketDeployment(
            self,
            "Deployment",
            sources=[
                s3deploy.Source.asset(str(WEB_DIR), exclude=["**/__pycache__", "*.pyc", ".DS_Store"]),
                s3deploy.Source.json_data(CONFIG_OBJECT, page_config),
            ],
            destination_bucket=self.bucket,
            distribution=self.distribution,
            distribution_paths=["/*"],
            prune=True,
            # The page's ES modules have stable names: browsers revalidate (ETag) so a deploy never mixes
            # old and new modules; CloudFront's own copy is invalidated below.
            cache_control=[s3deploy.CacheControl.no_cache()],
            memory_limit=512,
            log_group=log_group,
        )
        self._acknowledge_deployment(deployment)
        return deployment

    def _acknowledge_distribution(self) -> None:
        acknowledge(
            self.distribution,
            "AwsSolutions-CFR1",
            "The page is for a tenant's own people wherever they are; access is governed by Cognito sign-in, so "
            "no geographic restriction applies.",
        )
        acknowledge(
            self.distribution,
            "AwsSolutions-CFR2",
            "The distribution serves static files only (GET/HEAD from a private bucket); the API it calls has its "
            "own throttling and JWT authorizer. Attach a WAF web ACL per deployment if required (cost).",
        )
        if not self.has_custom_domain:
            acknowledge(
                self.distribution,
                "AwsSolutions-CFR4",
                "No custom domain is configured (hosting.domainName/certificateArn), so the distribution uses the "
                "default *.cloudfront.net certificate, whose viewer TLS policy cannot be raised; configure a domain "
                "and ACM certificate to enforce TLSv1.2_2021.",
            )

    def _acknowledge_deployment(self, deployment: s3deploy.BucketDeployment) -> None:
        # CDK's BucketDeployment runs one singleton function (and role) per stack.
        handler = deployment.handler_role
        pseudo = pseudo_spelling(self)
        # The CDK asset bucket is the bootstrap's: its qualifier is the synthesizer's (hnb659fds by default).
        qualifier = Stack.of(self).synthesizer.bootstrap_qualifier or DefaultStackSynthesizer.DEFAULT_QUALIFIER
        acknowledge(
            handler,
            "AwsSolutions-IAM4",
            "CDK's BucketDeployment custom resource role uses AWSLambdaBasicExecutionRole for its own log output; "
            "it runs only at deploy time.",
            "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
        )
        acknowledge(
            handler,
            "AwsSolutions-IAM5",
            "CDK's BucketDeployment reads the page's asset zip from the CDK asset bucket and syncs every object of "
            "the page's bucket (CDK's read/write action groups on those two buckets only), and grants itself "
            "CloudFront CreateInvalidation/GetInvalidation on '*' (CDK's code, not configurable).",
            "Action::s3:GetBucket*",
            "Action::s3:GetObject*",
            "Action::s3:List*",
            "Action::s3:Abort*",
            "Action::s3:DeleteObject*",
            f"Resource::arn:{pseudo.partition}:s3:::cdk-{qualifier}-assets-{pseudo.account}-{pseudo.region}/*",
            f"Resource::{arn_ref(self.bucket)}/*",
            "Resource::*",
        )
        singleton = handler.node.scope
        assert singleton is not None
        acknowledge(
            singleton,
            "AwsSolutions-L1",
            "CDK's BucketDeployment handler: its runtime is chosen by aws-cdk-lib (a deploy-time custom resource, "
            "updated with the CDK version), not by this project.",
        )

    @staticmethod
    def regional_wildcards() -> tuple[str, ...]:
        """API Gateway and S3 origins of the region, for a CSP that cannot name them (see the stack)."""
        return (
            f"https://*.execute-api.{Aws.REGION}.{Aws.URL_SUFFIX}",
            f"https://*.s3.{Aws.REGION}.{Aws.URL_SUFFIX}",
            f"https://*.s3.{Aws.URL_SUFFIX}",
        )


@jsii.implements(IStableStringProducer)
class _Producer:
    """A ``Lazy.string`` producer that calls back into the construct at synth."""

    def __init__(self, produce: Callable[[], str]) -> None:
        self._produce = produce

    def produce(self) -> str:
        return self._produce()

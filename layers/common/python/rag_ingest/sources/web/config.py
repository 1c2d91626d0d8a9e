"""A web source's configuration (docs/sources.md, "config by kind"), validated with clear errors.

``WebSourceConfig.model_validate(config_dict)`` raises pydantic's ``ValidationError`` for a
non-http(s) URL, a seed or sitemap outside the scope's host, a seed outside the scope, or a cap out
of range. The scope defaults to the first seed's host and folder. ``policy_refusal`` asks the URL
policy about the scope's host. Imports ``core.url_policy`` and ``sources.web``.
"""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rag_ingest.core.url_policy import UrlPolicy, UrlRefusedError
from rag_ingest.sources.web.fetching import URL_REFUSED_PREFIX
from rag_ingest.sources.web.urls import InvalidUrlError, Scope, canonical_url, folder_of, host_of

DEFAULT_TRACKING_PARAMETERS = ("utm_*", "fbclid", "gclid", "mc_cid", "mc_eid")
MAX_URLS = 100


class ScopeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    host: str = Field(min_length=1, max_length=260)
    path_prefix: str = Field(default="/", max_length=1024)

    @field_validator("host")
    @classmethod
    def _host(cls, value: str) -> str:
        try:
            return host_of(canonical_url(f"http://{value}/"))
        except InvalidUrlError as exc:
            raise ValueError(f"not a host name: {value!r}") from exc

    @field_validator("path_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("path_prefix must start with '/'")
        return value


class WebSourceConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    seeds: list[str] = Field(default_factory=list, max_length=MAX_URLS)
    sitemaps: list[str] = Field(default_factory=list, max_length=MAX_URLS)
    scope: ScopeConfig | None = None
    max_pages: int = Field(default=1_000, ge=1, le=10_000)
    max_depth: int = Field(default=5, ge=0, le=50)
    max_page_bytes: int = Field(default=10 * 1024 * 1024, ge=1024, le=100 * 1024 * 1024)
    requests_per_second: float = Field(default=2.0, gt=0, le=50)
    concurrency: int = Field(default=2, ge=1, le=16)
    tracking_parameters: list[str] = Field(default_factory=lambda: list(DEFAULT_TRACKING_PARAMETERS), max_length=100)

    @field_validator("seeds", "sitemaps")
    @classmethod
    def _urls(cls, values: list[str]) -> list[str]:
        canonical = []
        for value in values:
            try:
                canonical.append(canonical_url(value))
            except InvalidUrlError as exc:
                raise ValueError(f"{value!r} is not an absolute http or https URL") from exc
        return list(dict.fromkeys(canonical))

    @model_validator(mode="after")
    def _scope(self) -> Self:
        if not self.seeds and not self.sitemaps:
            raise ValueError("a web source needs at least one seed or sitemap URL")
        if self.scope is None:
            first = (self.seeds or self.sitemaps)[0]
            self.scope = ScopeConfig(host=host_of(first), path_prefix=folder_of(first) if self.seeds else "/")
        scope = self.crawl_scope
        self.seeds = [canonical_url(seed, self.tracking_parameters) for seed in self.seeds]
        for seed in self.seeds:
            if not scope.contains(seed):
                raise ValueError(f"the seed {seed} is outside the scope {scope.host}{scope.path_prefix}")
        for sitemap in self.sitemaps:
            if not scope.on_host(sitemap):
                raise ValueError(f"the sitemap {sitemap} is not on the scope's host {scope.host}")
        return self

    def policy_refusal(self, policy: UrlPolicy) -> tuple[str, str] | None:
        """``(code, message)`` if the URL policy refuses the scope's host now (a link-local or private
        address, plain http in AWS), for a clear 400 when the source is created; None if it may be read."""
        first = (self.seeds or self.sitemaps)[0]
        try:
            policy.resolve(f"{first.split('://', 1)[0]}://{self.crawl_scope.host}/")
        except UrlRefusedError as exc:
            return URL_REFUSED_PREFIX + exc.code.removeprefix("WEBHOOK_URL_"), f"{first}: {exc.message}"
        return None

    @property
    def crawl_scope(self) -> Scope:
        assert self.scope is not None  # set by the validator
        return Scope(host=self.scope.host, path_prefix=self.scope.path_prefix)

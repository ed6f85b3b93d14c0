"""Settings read from the environment (prefix DOSSIER_). Each service builds one and passes it down."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.contracts.workspace import CATALOG_LIMIT_MAX, QUESTION_MAX_CHARS

MAX_GATEWAY_WORKERS = 64


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, which a container's cpuset narrows)."""
    return len(os.sched_getaffinity(0))


class CommonSettings(BaseSettings):
    """What every service needs: where the bus, its database and the object store are."""

    # Built when read (each process reads one of the classes below), not as each is defined.
    model_config = SettingsConfigDict(env_prefix="DOSSIER_", extra="ignore", defer_build=True)

    home: Path = Path(".dossier")
    # One URL, or a comma-separated list of every node of a cluster (a client fails over among them).
    nats_url: str = "nats://127.0.0.1:4222"
    # Replicas of the event and dead-letter streams and of every durable consumer (3 on a 3-node cluster).
    stream_replicas: int = Field(default=1, ge=1, le=5)
    # The service's own NATS user (shared.natsauth); empty connects anonymously, which a secured server refuses.
    nats_user: str = ""
    nats_password: str = Field(default="", repr=False)
    # Reconnect forever, this long between tries; ping this often so a silent server is noticed.
    nats_reconnect_wait: int = 2
    nats_ping_interval: int = 20
    # Where this process reports its health for the local supervisor (set by the stack; off if unset).
    health_file: Path | None = None
    health_interval: float = 2.0
    # A process the local stack starts before its servers are ready waits for this file before it connects.
    infra_ready_file: Path | None = None
    database_url: str = ""
    # Above the bus handler concurrency's typical need; a handler holds at most one connection at a time.
    db_pool_size: int = 20
    # Proof of caller (shared/proof.py): a signing process's own Ed25519 key, and every signer's public key.
    proof_key: str = Field(default="", repr=False)
    proof_public_keys: str = ""
    request_timeout: float = 5.0
    s3_endpoint: str = "127.0.0.1:9000"
    s3_access_key: str = Field(default="", repr=False)
    s3_secret_key: str = Field(default="", repr=False)
    s3_bucket: str = "dossier"
    s3_secure: bool = False
    # Off only in fault tests that must leave events unrelayed in the outbox.
    outbox_relay: bool = True
    # How long a published outbox row is kept (for a restore's redelivery, shared/redelivery.py) before it
    # is deleted.
    outbox_keep_seconds: float = Field(default=86400.0, ge=0)
    log_level: str = "INFO"
    # The local stack's name of this process (`gateway-w2`, `workspace.2`), put in every log line, and the
    # file its output goes to, followed when the supervisor rotates it (shared.observe.LogFileHandler).
    process: str = ""
    log_file: Path | None = None
    # With tracing on, a span per database statement (most of a run's trace); false leaves them out.
    trace_sql: bool = True
    # Prometheus /metrics of this process on 127.0.0.1 (0: any free port); None serves none.
    metrics_port: int | None = None
    # The bearer token a scraper sends to that /metrics (the stack keeps it in $DOSSIER_HOME/metrics-token).
    metrics_token: str = Field(default="", repr=False)

    @property
    def nats_servers(self) -> list[str]:
        return [url.strip() for url in self.nats_url.split(",") if url.strip()]


class GatewaySettings(CommonSettings):
    http_host: str = "127.0.0.1"
    http_port: int = 8080
    admin_token: str = Field(default="", repr=False)
    # How long a resolved token is trusted before its row is read again (revocations elsewhere show after it).
    token_cache_seconds: float = Field(default=2.0, ge=0, le=4)
    max_json_bytes: int = 1024 * 1024
    max_upload_bytes: int = 52_428_800
    ingest_timeout: float = 300.0
    # Before a token is known (the workbench's forms, /v1/health): request bodies held in all, and how long
    # a request waits for room before it is answered 503 `overloaded` (services.gateway.transport.admission).
    preauth_buffer_bytes: int = Field(default=16 * 1024 * 1024, ge=0)
    preauth_wait_seconds: float = Field(default=1.0, ge=0)
    # Requests per second per token (a token bucket of `rate_burst`), per gateway port (all its workers).
    rate_per_token: float = Field(default=50.0, gt=0)
    rate_burst: int = Field(default=100, ge=1)
    # A request's line and headers must arrive within this; its body may pause no longer than the other.
    header_timeout_seconds: float = Field(default=10.0, gt=0)
    body_timeout_seconds: float = Field(default=30.0, gt=0)
    # Deadlines a body trickled a byte at a time cannot reset (services.gateway.transport.protocol): the rest of a
    # body answered before it ended (a refusal) is read and dropped for at most `drain_timeout_seconds`; a
    # body read before its caller is known to hold a token must end within `preauth_body_timeout_seconds`
    # of its headers; and every body, once read for `body_timeout_seconds`, must have averaged at least
    # `body_min_bytes_per_second` (0: no such rule).
    drain_timeout_seconds: float = Field(default=5.0, gt=0)
    preauth_body_timeout_seconds: float = Field(default=20.0, gt=0)
    body_min_bytes_per_second: int = Field(default=1024, ge=0)
    # Open connections in all and from one peer address. Over either, a connection without a request in
    # progress for a caller with a token is closed to make room, refused or pre-auth bodies first; when
    # there is none, the new one is closed at once. The total is also kept under the process's
    # file-descriptor limit (services.gateway.transport.connections).
    max_connections: int = Field(default=8192, ge=1)
    max_connections_per_peer: int = Field(default=256, ge=1)
    # Gateway processes sharing the HTTP port (services.gateway.transport.workers), and which of them this one is
    # (0: a process started on its own; the parent or the local stack numbers the ones it starts from 1).
    gateway_workers: int = Field(default_factory=available_cores, ge=1, le=MAX_GATEWAY_WORKERS)
    gateway_worker: int = Field(default=0, ge=0, le=MAX_GATEWAY_WORKERS)
    # The file the workers of one port share their per-token rate buckets through (None: this process's own).
    gateway_rates_file: Path | None = None
    # The local supervisor's record of restarts (shared/restarts.py): exported on /metrics, read by /v1/health.
    restarts_file: Path | None = None


class PublicationSettings(CommonSettings):
    max_body_bytes: int = 1024 * 1024
    max_title_chars: int = 500
    # A diff lists at most this many lines (context included); past it the reply says `truncated`.
    max_diff_lines: int = 5000


class RunhostSettings(CommonSettings):
    model: str = "extractive"
    openai_base_url: str = ""
    openai_api_key: str = Field(default="", repr=False)
    openai_model: str = ""
    openai_backoff_seconds: float = 0.5
    openai_max_backoff_seconds: float = 10.0
    # How long a model request is retried (429, 5xx, resets, timeouts, an error in a 200) before the run
    # fails, counted from its first failure (so an attempt that hung to its deadline leaves all of it):
    # long enough to ride out an endpoint's restart. No attempt starts later.
    openai_retry_seconds: float = Field(default=180.0, ge=0)
    # The most attempts one model request makes, the first included.
    openai_max_attempts: int = Field(default=30, ge=1)
    # The deadline of one attempt (one whole HTTP request), however slowly its bytes arrive.
    openai_timeout_seconds: float = Field(default=120.0, gt=0)
    # Answers with nothing usable (no choices, a body that is not a JSON object) that fail a request at once.
    openai_unusable_replies: int = Field(default=3, ge=1)
    # Sent as `parallel_tool_calls` when set; unset, the field is left out (not every server knows it).
    openai_parallel_tool_calls: bool | None = None
    # Ask for the reply as a stream of chunks (`stream: true`), assembled into the same step as a whole reply.
    openai_stream: bool = False
    # Named steps for the `scripted:<name>` policy (tests): <scripts_dir>/<name>.json.
    scripts_dir: Path | None = None
    run_lease_seconds: float = 15.0
    run_poll_seconds: float = 0.5
    run_concurrency: int = 4
    run_grant_seconds: float = 900.0
    # An external run whose lease has stayed expired this long fails as `abandoned`.
    external_abandon_seconds: float = Field(default=86400.0, gt=0)
    run_max_steps: int = 400
    run_max_chars: int = 4_000_000
    run_max_seconds: float = 1800.0
    # Paid model requests per run: what a model that never finishes costs at most. A request is at least one
    # step, so at the step limit's value this binds only when set lower, or when a run asks for fewer.
    run_max_model_requests: int = Field(default=400, ge=1)
    # A model that reads again what it already read (the same call, the same answer) this many times in a
    # row, with nothing new read or written between, is in a loop: the run ends at `max_rereads`.
    run_max_rereads: int = Field(default=5, ge=1)
    # The same failing model step (a bad call, narration, a cut reply) this many times in a row fails the run.
    run_same_failures: int = 3
    # Fault tests only: slows every step so a crash can land mid-run. Zero in any real deployment.
    run_step_delay_seconds: float = 0.0
    max_plan_bytes: int = 64 * 1024
    # Days after its end that a run keeps its working files and model-call journal (fractions allowed; 0: let
    # them go at the next sweep). Unset or `keep`: kept for ever. The ledger, answer, claims and PROV stay.
    run_retention_days: float | None = Field(default=None, ge=0)
    # How often each runhost process trims ended runs' journals, releases files past retention and deletes
    # stored contents no run's file names.
    run_storage_sweep_seconds: float = Field(default=60.0, gt=0)
    # A stored content no file names is deleted only once untouched this long: longer than any writer takes
    # between touching a content and indexing a file on it (one put of at most 4 MiB).
    run_files_grace_seconds: float = Field(default=600.0, ge=0)

    @field_validator("run_retention_days", mode="before")
    @classmethod
    def _keep(cls, value: object) -> object:
        return None if isinstance(value, str) and value.strip().lower() in ("", "keep") else value


class WorkspaceSettings(CommonSettings):
    catalog_default_limit: int = 50
    catalog_max_limit: int = Field(default=CATALOG_LIMIT_MAX, ge=1, le=CATALOG_LIMIT_MAX)
    # How long the catalog and the checkpoint wait for an owner's batch check before marking its items.
    owner_check_timeout: float = 2.0
    retain_timeout: float = 3.0
    max_title_chars: int = 500
    max_goal_bytes: int = 64 * 1024
    max_summary_bytes: int = 64 * 1024
    max_open_questions: int = 200
    max_question_chars: int = Field(default=QUESTION_MAX_CHARS, ge=1, le=QUESTION_MAX_CHARS)
    # Durable JetStream consumer names start with this; tests give each instance its own.
    consumer_prefix: str = "workspace"


class ArtifactSettings(CommonSettings):
    max_artifact_bytes: int = 52_428_800
    max_title_chars: int = 500


class AssetsSettings(CommonSettings):
    """Bounds of acquisition and parsing. Every limit applies per file (per version)."""

    max_upload_bytes: int = 52_428_800
    # `name=/abs/dir,name2=/abs/dir2`: the only directories `assets.import` may read from.
    approved_roots: str = ""
    # Imports read their files on threads of their own (services.assets.import_threads): at most this many at
    # once, this many for one scope, each waiting this long for its turn and as long again for its read.
    import_threads: int = Field(default=8, ge=1)
    import_threads_per_scope: int = Field(default=2, ge=1)
    import_seconds: float = Field(default=30.0, gt=0)
    max_parts: int = 2000
    max_passages: int = 20_000
    max_passage_chars: int = 20_000
    max_text_chars: int = 32_000_000
    parse_cpu_seconds: int = 60
    parse_memory_bytes: int = 1_536 * 1024 * 1024
    parse_wall_seconds: float = 90.0
    # OCR of pages without a text layer (RapidOCR in the sandbox): pages and seconds per file, render
    # resolution, and the address space the OCR path may use (measured: 2.13 GB after twenty pages, 0.89 GB
    # of it resident; OpenVINO reserves more than it touches; see services.assets.extract.ocr).
    # 200 dpi: at 150 the recognition model ran the words of 11 pt body text together and found 44% of them
    # (bench/ocr.py), at 200 it finds 89%, about as fast with one line per call.
    ocr_max_pages: int = 20
    ocr_seconds: float = 60.0
    ocr_dpi: int = 200
    ocr_memory_bytes: int = 3_072 * 1024 * 1024
    max_zip_entries: int = 10_000
    max_zip_entry_bytes: int = 256 * 1024 * 1024
    max_zip_total_bytes: int = 512 * 1024 * 1024
    max_zip_ratio: int = 100
    extract_concurrency: int = 2
    # A PDF of at least this many pages (after `max_parts`) is read by several parsers at once, one per
    # parser slot free with nobody waiting (services.assets.splitting); 0 reads every file with one parser.
    extract_split_pages: int = 64
    # Versions of one scope that may wait for a parser slot; more answer `timeout` (try again later).
    extract_queue_per_scope: int = 64
    extract_attempts: int = 2
    recovery_interval_seconds: float = 30.0
    # Fault injection for crash tests only: sleep after extraction, inside the activation transaction.
    assets_pause_before_activate_seconds: float = 0.0
    # Fault tests only: every parse takes this much longer (a slow parser, holding its slot).
    assets_parse_delay_seconds: float = 0.0

"""The judge cache: a DuckDB table of replies keyed by model, prompt, sample index and call settings.

Re-grading an unchanged case reads its verdicts here and makes no call. A reply is the tenant's that the
grading ran for (``GRADING_TENANT``): another tenant asking the same judge the same question never gets it
from the cache, so the cache tells nobody what another tenant graded. One connection per file is
shared by every runtime of the process and guarded by a lock; a file another process holds is
reported once and the run continues without a cache.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from pathlib import Path
from typing import Any

from tracegrade.models.results import TokenUsage
from tracegrade.store.tenancy import DEFAULT_TENANT, GRADING_TENANT

__all__ = ["DEFAULT_CACHE_PATH", "JudgeCache", "cache_key", "open_judge_cache"]

log = logging.getLogger("tracegrade.judges")

DEFAULT_CACHE_PATH = Path(".tracegrade") / "judge_cache.duckdb"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS judge_cache (
    key VARCHAR PRIMARY KEY,
    model VARCHAR NOT NULL,
    sample_index INTEGER NOT NULL,
    reply VARCHAR NOT NULL,
    input_tokens BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    cost_usd DOUBLE NOT NULL,
    created_at TIMESTAMP DEFAULT current_timestamp,
    tenant VARCHAR DEFAULT 'default'
);
ALTER TABLE judge_cache ADD COLUMN IF NOT EXISTS tenant VARCHAR DEFAULT 'default'
"""


def cache_key(model: str, prompt: str, sample_index: int, params: dict[str, Any], tenant: str = DEFAULT_TENANT) -> str:
    """SHA-256 over the model, the prompt's hash, the sample index, the call settings and the tenant (the
    default tenant's keys are those of a cache made before tenants, which stay valid)."""
    prompt_hash = hashlib.sha256(prompt.encode("utf-8")).hexdigest()
    parts: list[Any] = [model, prompt_hash, sample_index, params]
    if tenant != DEFAULT_TENANT:
        parts.append(tenant)
    material = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


class JudgeCache:
    """Reads and writes cached replies; thread-safe through one lock around one connection."""

    def __init__(self, path: str | Path) -> None:
        import duckdb

        from tracegrade.store.duckdb_api import NEW_FILES

        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = duckdb.connect(str(self.path), config=dict(NEW_FILES))
        self._conn.execute(_SCHEMA)
        self._lock = threading.Lock()

    def get(self, key: str) -> tuple[str, TokenUsage] | None:
        """The cached reply and the usage of the call that produced it, or None."""
        with self._lock:
            row = self._conn.execute(
                "SELECT reply, input_tokens, output_tokens, cost_usd FROM judge_cache WHERE key = ?", [key]
            ).fetchone()
        if row is None:
            return None
        return row[0], TokenUsage(input_tokens=row[1], output_tokens=row[2], cost_usd=row[3], calls=1)

    def put(self, key: str, model: str, sample_index: int, reply: str, usage: TokenUsage) -> None:
        """Keep a reply under ``key`` (made by ``cache_key`` for the grading's tenant) as that tenant's."""
        row = [key, model, sample_index, reply, usage.input_tokens, usage.output_tokens, usage.cost_usd]
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO judge_cache (key, model, sample_index, reply, input_tokens, output_tokens,"
                " cost_usd, tenant) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [*row, GRADING_TENANT.get()],
            )

    def __len__(self) -> int:
        with self._lock:
            (count,) = self._conn.execute("SELECT count(*) FROM judge_cache").fetchone() or (0,)
            return int(count)

    def close(self) -> None:
        with self._lock:
            self._conn.close()


_open_caches: dict[Path, JudgeCache] = {}
_open_lock = threading.Lock()


def open_judge_cache(path: str | Path | None = None) -> JudgeCache | None:
    """The process-wide cache for ``path`` (default ``./.tracegrade/judge_cache.duckdb``).

    Returns None (after logging why) when the file cannot be opened, e.g. another process holds it.
    """
    resolved = Path(path or DEFAULT_CACHE_PATH).resolve()
    with _open_lock:
        cache = _open_caches.get(resolved)
        if cache is None:
            try:
                cache = JudgeCache(resolved)
            except Exception as exc:
                log.warning("judge cache %s is unavailable (%s); judging without a cache", resolved, exc)
                return None
            _open_caches[resolved] = cache
        return cache

"""The throughput floor: a one-process FastAPI app answering a fixed JSON document from memory.

`bench/load.py` runs it under uvicorn with the same route shape as the gateway's exact-version read and
the reply that read gave, so wrk drives both with the same request in the same run.
"""

from __future__ import annotations

import json
import os
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse

DOCUMENT: dict[str, Any] = json.loads(os.environ.get("BENCH_FLOOR_JSON", "{}"))
app = FastAPI()


@app.get("/v1/publications/{pub_id}/versions/{version}")
async def read(pub_id: str, version: int) -> JSONResponse:
    return JSONResponse(DOCUMENT)

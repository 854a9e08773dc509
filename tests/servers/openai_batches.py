"""The OpenAI Batch API of the fake OpenAI server: files and batches, real wire format.

    POST /v1/files                  multipart upload (purpose=batch, a JSONL file)
    GET  /v1/files/{id}             the file object
    GET  /v1/files/{id}/content     the file's bytes (input, output or error file)
    POST /v1/batches                create (input_file_id, endpoint, completion_window, metadata)
    GET  /v1/batches/{id}           the batch object
    GET  /v1/batches                list, newest first (limit, after)
    POST /v1/batches/{id}/cancel    cancel

Entries are answered by the server's own chat / completions builders. Successful
answers go to the output file and failed ones (an HTTP error from the builder, an
injected `error`) to the error file with their status; expired and cancelled
entries go to the error file with OpenAI's `batch_expired` / `batch_cancelled`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from aiohttp import web

from .base import ApiError, json_response
from .batches import BatchBook, BatchJob, guarded
from .responders import JsonDict

if TYPE_CHECKING:
    from .openai_server import OpenAIServer

COMPLETION_WINDOW_S = 24 * 3600
_FAULT_ERRORS = {
    "expired": (
        "batch_expired",
        "This request could not be executed before the completion window expired.",
    ),
    "canceled": (
        "batch_cancelled",
        "This request was not executed because the batch was cancelled.",
    ),
}


class OpenAIBatchRoutes:
    """Files and batches of one `OpenAIServer`; see the module docstring."""

    def __init__(self, server: OpenAIServer, book: BatchBook) -> None:
        self.server, self.book = server, book
        self.files: dict[str, tuple[JsonDict, bytes]] = {}

    def routes(self) -> list[web.AbstractRouteDef]:
        return [
            web.post("/v1/files", guarded(self.server, self._upload)),
            web.get("/v1/files/{id}", guarded(self.server, self._file)),
            web.get("/v1/files/{id}/content", guarded(self.server, self._content)),
            web.post("/v1/batches", guarded(self.server, self._create)),
            web.get("/v1/batches", guarded(self.server, self._list)),
            web.get("/v1/batches/{id}", guarded(self.server, self._retrieve)),
            web.post("/v1/batches/{id}/cancel", guarded(self.server, self._cancel)),
        ]

    # ------------------------------------------------------------ files
    async def _upload(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload, purpose = form.get("file"), form.get("purpose")
        if purpose != "batch":
            raise ApiError(400, "'purpose' must be 'batch' here.", param="purpose")
        if not isinstance(upload, web.FileField):
            raise ApiError(400, "'file' must be a file upload.", param="file")
        data = upload.file.read()
        self.server._note(request, None)
        return json_response(self._store(upload.filename, data, "batch"))

    def _store(self, filename: str, data: bytes, purpose: str) -> JsonDict:
        file_id = self.server.new_id("file-")
        meta = {
            "id": file_id,
            "object": "file",
            "bytes": len(data),
            "created_at": self.server.timestamp(),
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
            "expires_at": None,
            "status_details": None,
        }
        self.files[file_id] = (meta, data)
        return meta

    def _stored(self, request: web.Request) -> tuple[JsonDict, bytes]:
        found = self.files.get(request.match_info["id"])
        if found is None:
            raise ApiError(404, f"No such File object: {request.match_info['id']}", param="id")
        return found

    async def _file(self, request: web.Request) -> web.Response:
        return json_response(self._stored(request)[0])

    async def _content(self, request: web.Request) -> web.Response:
        return web.Response(body=self._stored(request)[1], content_type="application/octet-stream")

    # ------------------------------------------------------------ batches
    async def _create(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.server._note(request, body)
        endpoint = body.get("endpoint")
        if endpoint not in ("/v1/chat/completions", "/v1/completions"):
            raise ApiError(400, f"endpoint {endpoint!r} is not served here.", param="endpoint")
        if body.get("completion_window") != "24h":
            raise ApiError(400, "completion_window must be '24h'.", param="completion_window")
        found = self.files.get(str(body.get("input_file_id")))
        if found is None:
            raise ApiError(404, "No such File object.", param="input_file_id")
        entries = self._entries(found[1], endpoint)
        job = BatchJob(
            id=self.server.new_id("batch_"),
            entries=entries,
            endpoint=endpoint,
            created_at=float(self.server.timestamp()),
            metadata=body.get("metadata"),
            status="validating",
            extra={"input_file_id": body["input_file_id"]},
        )
        self.book.add(job, self._answer)
        return json_response(self._batch(job))

    def _entries(self, data: bytes, endpoint: str) -> list[tuple[str, JsonDict]]:
        entries: list[tuple[str, JsonDict]] = []
        seen: set[str] = set()
        for number, raw in enumerate(data.splitlines(), start=1):
            if not raw.strip():
                continue
            line = json.loads(raw)
            custom_id = line.get("custom_id")
            if not isinstance(custom_id, str) or custom_id in seen:
                raise ApiError(400, f"line {number}: custom_id missing or repeated.")
            if line.get("method") != "POST" or line.get("url") != endpoint:
                raise ApiError(400, f"line {number}: every line must POST to {endpoint}.")
            seen.add(custom_id)
            entries.append((custom_id, line.get("body") or {}))
        limit = self.book.max_requests or 50_000
        if not entries or len(entries) > limit:
            raise ApiError(
                400, f"a batch holds 1 to {limit} requests; this file has {len(entries)}."
            )
        return entries

    def _answer(self, custom_id: str, body: JsonDict) -> JsonDict:
        build = self.server.chat_completion if "messages" in body else self.server.completion
        try:
            return {"status": 200, "body": build(body, None)}
        except ApiError as err:
            return {"status": err.status, "body": self.server.error_payload(err)}

    async def _retrieve(self, request: web.Request) -> web.Response:
        return json_response(self._batch(self._job(request)))

    def _job(self, request: web.Request) -> BatchJob:
        job = self.book.jobs.get(request.match_info["id"])
        if job is None:
            raise ApiError(404, f"No batch found with id '{request.match_info['id']}'.")
        return job

    async def _list(self, request: web.Request) -> web.Response:
        jobs = self.book.newest_first()
        after = request.query.get("after")
        if after is not None:
            ids = [job.id for job in jobs]
            jobs = jobs[ids.index(after) + 1 :] if after in ids else []
        limit = int(request.query.get("limit", "20"))
        page = [self._batch(job) for job in jobs[:limit]]
        return json_response({
            "object": "list",
            "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": len(jobs) > limit,
        })  # fmt: skip

    async def _cancel(self, request: web.Request) -> web.Response:
        job = self._job(request)
        if job.ended_at is None:
            job.cancel_requested = True
            job.status = "cancelling"
        return json_response(self._batch(job))

    def _batch(self, job: BatchJob) -> JsonDict:
        """The batch object; an ended batch gets its output and error files on first sight."""
        if job.ended_at is not None and "status" not in job.extra:
            self._finish(job)
        status = job.extra.get("status", job.status)
        if status == "validating":
            job.status = "in_progress"  # the next look sees it running
        created = int(job.created_at)
        ended = job.ended_at is not None
        failed = sum(r["outcome"] != "answered" or r["status"] != 200 for r in job.results)
        return {
            "id": job.id,
            "object": "batch",
            "endpoint": job.endpoint,
            "model": None,
            "errors": None,
            "input_file_id": job.extra["input_file_id"],
            "completion_window": "24h",
            "status": status,
            "output_file_id": job.extra.get("output_file_id"),
            "error_file_id": job.extra.get("error_file_id"),
            "created_at": created,
            "in_progress_at": created,
            "expires_at": created + COMPLETION_WINDOW_S,
            "finalizing_at": int(job.ended_at) if ended else None,
            "completed_at": int(job.ended_at) if ended and status == "completed" else None,
            "failed_at": None,
            "expired_at": int(job.ended_at) if ended and status == "expired" else None,
            "cancelling_at": None,
            "cancelled_at": int(job.ended_at) if ended and status == "cancelled" else None,
            "request_counts": {
                "total": len(job.entries),
                "completed": len(job.results) - failed if ended else 0,
                "failed": failed if ended else 0,
            },
            "metadata": job.metadata,
        }

    def _finish(self, job: BatchJob) -> None:
        output, errors = [], []
        for result in job.results:
            line: JsonDict = {
                "id": self.server.new_id("batch_req_"),
                "custom_id": result["custom_id"],
            }
            if result["outcome"] == "answered":
                line["response"] = {
                    "status_code": result["status"],
                    "request_id": self.server.new_id("req_"),
                    "body": result["body"],
                }
                line["error"] = None
                (output if result["status"] == 200 else errors).append(line)
            elif result["outcome"] == "errored":
                line["response"] = {
                    "status_code": 500,
                    "request_id": self.server.new_id("req_"),
                    "body": {
                        "error": {
                            "message": "Injected batch entry failure.",
                            "type": "server_error",
                            "param": None,
                            "code": None,
                        }
                    },
                }
                line["error"] = None
                errors.append(line)
            else:
                code, message = _FAULT_ERRORS[result["outcome"]]
                line["response"] = None
                line["error"] = {"code": code, "message": message}
                errors.append(line)
        names = {"output_file_id": output, "error_file_id": errors}
        for name, lines in names.items():
            if lines:
                data = "".join(json.dumps(line) + "\n" for line in lines).encode()
                job.extra[name] = self._store(f"{job.id}_{name}.jsonl", data, "batch_output")["id"]
        job.extra["status"] = {"ended": "completed"}.get(job.status, job.status)

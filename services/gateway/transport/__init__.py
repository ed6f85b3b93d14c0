"""The gateway's transport, between the socket and the routes: the worker processes sharing the port,
uvicorn's protocol held to deadlines and connection caps with one write per response, the guard of body
size, token and rate in front of FastAPI, the hot read beside its router, and request bodies streamed in
(multipart uploads, into object storage)."""

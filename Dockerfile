# One image for every Dossier service; docker-compose.yml and deploy/k8s pick the service by command.
#
# BASE is any Debian-like image with Python 3.11+ and venv (default: the official slim image). Where no
# registry is reachable, build a base from Debian's packages (see deploy/README.md, "Containers without a
# registry") and pass --build-arg BASE=<that image>. pip reads the CA bundle from the build secret `ca`
# when one is given (a proxy's own CA), and the package index from PIP_INDEX_URL.
ARG BASE=python:3.11-slim

FROM ${BASE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python3 -m venv /opt/dossier
COPY pyproject.toml README.md ./
COPY shared ./shared
COPY services ./services
COPY dossier_cli ./dossier_cli
# No extras: the local stack's engines (the `local` extra) never enter the production image.
RUN --mount=type=secret,id=ca,required=false \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi; \
    /opt/dossier/bin/pip install --upgrade 'pip>=25' && /opt/dossier/bin/pip install .

FROM ${BASE}
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PATH=/opt/dossier/bin:$PATH
# OpenCV, under the OCR engine of the assets service, links libGL and GLib.
RUN apt-get update && apt-get install -y --no-install-recommends libgl1 libglib2.0-0 && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/dossier /opt/dossier
# The services' user; and the parser's (services/assets/confinement.py), made here so that a read-only
# root file system (Kubernetes) needs no useradd at run time.
RUN useradd --system --uid 10001 --no-create-home dossier \
    && useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin dossier_parser
WORKDIR /opt/dossier
USER dossier
CMD ["python", "-m", "services.gateway"]

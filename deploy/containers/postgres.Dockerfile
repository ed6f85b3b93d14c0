# PostgreSQL for compose and the container tests where no registry is reachable: Debian's own package
# (bookworm: PostgreSQL 15) on the Debian base of build-images.sh. Drop-in for the official image as
# docker-compose.yml and tests/support/infra.py use it (postgres-entrypoint.sh says what it honours).
ARG BASE=dossier-base:bookworm
FROM ${BASE}
# The package's scripts would create and start a cluster; the entry point makes the one the container uses.
RUN printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 0755 /usr/sbin/policy-rc.d \
    && mkdir -p /etc/postgresql-common \
    && echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.conf \
    && apt-get update && apt-get install -y --no-install-recommends postgresql-15 \
    && rm -rf /var/lib/apt/lists/* /usr/sbin/policy-rc.d \
    && mkdir -p /var/lib/postgresql/data /var/run/postgresql /docker-entrypoint-initdb.d \
    && chown postgres:postgres /var/lib/postgresql/data /var/run/postgresql \
    && chmod 0700 /var/lib/postgresql/data
ENV PATH=/usr/lib/postgresql/15/bin:$PATH PGDATA=/var/lib/postgresql/data
COPY deploy/containers/postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
USER postgres
EXPOSE 5432
STOPSIGNAL SIGINT
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["postgres"]

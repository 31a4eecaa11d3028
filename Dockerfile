# oversell in a container, for sharded load on Kubernetes (deploy/k8s/, docs/src/scaling/kubernetes.md).
#
#   docker build -t oversell:dev .
#   docker run --rm oversell:dev scenarios
#
# Stage 1 builds the release binary; stage 2 is a slim Debian holding only the binary and the
# bundled scenarios (they are also compiled in; the files let `--scenario /opt/oversell/
# scenarios/NAME.toml` and a mounted folder of your own work the same way).

FROM rust:1.95-slim-bookworm AS builder
WORKDIR /src
# The commit reports carry (build.rs reads it when there is no .git in the build context).
ARG OVERSELL_GIT_COMMIT=unknown
ENV OVERSELL_GIT_COMMIT=${OVERSELL_GIT_COMMIT}
COPY . .
RUN cargo build --release --locked --bin oversell \
    && strip target/release/oversell

FROM debian:bookworm-slim AS runtime
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /opt/oversell oversell
WORKDIR /opt/oversell
COPY --from=builder /src/target/release/oversell /usr/local/bin/oversell
COPY --from=builder /src/scenarios/ /opt/oversell/scenarios/
USER 10001
# Shards write their raw results here (a shared volume on Kubernetes).
VOLUME ["/results"]
ENTRYPOINT ["oversell"]
CMD ["--help"]

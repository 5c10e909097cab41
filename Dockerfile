# eosink's container image: `make image` builds it (docs/docker.md).
#
#   docker build --build-arg VERSION=v1.2.3 -t eosink:v1.2.3 .
#   docker run --rm --read-only -v "$PWD/pipeline.yaml:/etc/eosink/pipeline.yaml:ro" \
#     -e KAFKA_BOOTSTRAP_SERVERS -e DATABASE_URL eosink:v1.2.3 run -config /etc/eosink/pipeline.yaml
#
# The base images are the public ones; where no registry is reachable,
# test/docker/base-images.sh builds them locally under the same names. A release build pins
# them by digest (docs/docker.md, "Pinned base images"):
#   docker build --build-arg BUILD_IMAGE=golang:1.27.3-bookworm@sha256:<digest> \
#                --build-arg RUNTIME_IMAGE=debian:bookworm-slim@sha256:<digest> .
ARG GO_VERSION=1.27.3
ARG BUILD_IMAGE=golang:${GO_VERSION}-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

# Build stage: cgo, for confluent-kafka-go's bundled librdkafka (statically linked into the
# binary). No failpoints tag: the image carries no test hooks.
FROM ${BUILD_IMAGE} AS build
ARG GOPROXY=https://proxy.golang.org,direct
ARG GOSUMDB=sum.golang.org
ENV CGO_ENABLED=1 GOFLAGS=-buildvcs=false GOTOOLCHAIN=local GOPROXY=${GOPROXY} GOSUMDB=${GOSUMDB}
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN go build -trimpath -ldflags='-s -w' -o /out/eosink ./cmd/eosink \
 && /out/eosink version

# Runtime stage: Debian slim with the CA certificates (TLS to Kafka, PostgreSQL and the
# Schema Registry), the binary, and nothing to build with.
FROM ${RUNTIME_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb /var/log/apt /var/log/dpkg.log \
 && groupadd --system --gid 65532 eosink \
 && useradd --system --uid 65532 --gid 65532 --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin eosink
COPY --from=build /out/eosink /usr/local/bin/eosink
# eosink writes no files: logs go to standard error, state to PostgreSQL. The image runs with
# a read-only root filesystem (docker run --read-only; readOnlyRootFilesystem on Kubernetes).
USER 65532:65532
WORKDIR /etc/eosink
# /healthz, /readyz and /metrics, when the pipeline's http section listens on :9464 (the
# Helm chart's http.port).
EXPOSE 9464
ENTRYPOINT ["eosink"]
CMD ["help"]

ARG VERSION=dev
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="eosink" \
      org.opencontainers.image.description="Kafka to PostgreSQL, exactly once" \
      org.opencontainers.image.source="https://github.com/eosink/eosink" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}"

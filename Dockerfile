# syntax=docker/dockerfile:1
# Multi-stage build: a static leaf-server (pure Go, no cgo: the SQLite driver
# is pure Go too) on a distroless base, running as a non-root user.
#
# The image listens on 0.0.0.0:8080, so it refuses to start until it is told
# where segments live (docs/contract.md §12): set LEAF_SEGMENT_DSN to
#   - a shared database for several replicas, postgres://user:pass@host:5432/db
#     or mysql://user:pass@tcp(host:3306)/db (snowflake worker IDs then come
#     from a lease in that database unless LEAF_WORKER_ID_SOURCE says otherwise);
#   - sqlite:/data/leaf.db for one deliberate single server (mount a volume
#     on /data; never run two replicas on it).
# Unknown LEAF_* variables are refused with the nearest known name.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/leaf-server ./cmd/leaf-server \
 && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/leafctl ./cmd/leafctl \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/leaf-server /out/leafctl /usr/local/bin/
# Local state (the SQLite file of sqlite:/data/leaf.db, segment high-water
# marks, snowflake time mark), owned by the image's non-root user (distroless
# nonroot, 65532) so that the server can write it; a named volume mounted
# here starts as a copy of it, with the same owner.
COPY --from=build --chown=65532:65532 /out/data /data
VOLUME ["/data"]
ENV LEAF_LISTEN=0.0.0.0:8080 LEAF_DATA_DIR=/data
EXPOSE 8080
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/leaf-server"]

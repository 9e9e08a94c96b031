# syntax=docker/dockerfile:1
# Multi-stage build: a static leaf-server (pure Go, no cgo: the SQLite driver
# is pure Go too) on a distroless base, running as a non-root user.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/leaf-server ./cmd/leaf-server \
 && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/leafctl ./cmd/leafctl

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/leaf-server /out/leafctl /usr/local/bin/
# Local state (SQLite file, segment high-water marks, snowflake time mark).
VOLUME ["/data"]
ENV LEAF_LISTEN=0.0.0.0:8080 LEAF_DATA_DIR=/data
EXPOSE 8080
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/leaf-server"]

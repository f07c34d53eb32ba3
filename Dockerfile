# syntax=docker/dockerfile:1
# `staleguard` in a container (its `proxy` by default):
#
#   docker build -t staleguard .
#   docker run --rm -p 127.0.0.1:8787:8787 -e BROWSER_HISTORY_COMPACTION=on staleguard \
#     proxy --listen 0.0.0.0:8787 --upstream https://api.openai.com
#
# Several replicas behind nginx: deploy/README.md. The build needs only this checkout.

FROM rust:1-slim-bookworm AS build
WORKDIR /src
COPY . .
# The registry and target folders are BuildKit caches: a rebuild after a source change
# compiles the workspace's crates only.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p staleguard-cli \
    && install -D -s target/release/staleguard /out/staleguard

# glibc and libgcc (the binary links them) with CA certificates, no shell; runs as
# uid 65532 (nonroot). The proxy speaks TLS to its upstreams with its own root certificates.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/staleguard /usr/local/bin/staleguard
USER nonroot
# `staleguard proxy` reads ./staleguard.toml when it exists: mount one here
# (-v "$PWD/staleguard.toml:/etc/staleguard/staleguard.toml:ro") to run with the CMD below.
WORKDIR /etc/staleguard
EXPOSE 8787
ENTRYPOINT ["staleguard"]
# Inside a container the proxy must listen beyond loopback (its own default is
# 127.0.0.1:8787, which nothing outside the container reaches). It speaks plain HTTP and
# checks no caller: publish the port on loopback (-p 127.0.0.1:8787:8787) or put TLS and
# authentication in front of it (nginx, a load balancer, a service mesh). Without a config
# the upstream is given with the arguments (`proxy --listen 0.0.0.0:8787 --upstream URL`).
CMD ["proxy", "--listen", "0.0.0.0:8787"]

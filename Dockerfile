# lockwarden: build the release binary, then run it on a slim Debian as a non-root user.
#
# Build:  docker build -t lockwarden .
# Run:    docker run --rm -p 8080:8080 lockwarden            (embedded in-memory store)
#         docker run --rm -p 8080:8080 -e LOCKWARDEN_ZK=zk1:2181 lockwarden
#
# A .dockerignore listing `target` and `.git` keeps the build context small.

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked

FROM debian:bookworm-slim
# ca-certificates: for https notify_url webhooks.
RUN set -eux; \
    apt-get update; \
    apt-get install -y --no-install-recommends ca-certificates; \
    rm -rf /var/lib/apt/lists/*; \
    groupadd --system --gid 10001 lockwarden; \
    useradd --system --uid 10001 --gid lockwarden --no-create-home \
        --home-dir /nonexistent --shell /usr/sbin/nologin lockwarden
COPY --from=build /src/target/release/lockwarden /usr/local/bin/lockwarden
USER 10001:10001
EXPOSE 8080
ENV LOCKWARDEN_LISTEN=0.0.0.0:8080
ENTRYPOINT ["lockwarden"]
CMD ["serve"]

# gce-backend: one image for every role (run --role workers|cron|all) and the simulator (curl is
# for the healthchecks).
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin gce-backend

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates curl && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/gce-backend /usr/local/bin/gce-backend
COPY config /etc/gce-backend
# The API's tokens file, made on the first start (--tokens-init), lives on a volume here.
RUN mkdir -p /var/lib/gce-backend && chmod 700 /var/lib/gce-backend
WORKDIR /etc/gce-backend
ENTRYPOINT ["gce-backend"]

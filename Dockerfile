# Harbor Workbench as a Hugging Face Docker Space (or any container host).
# UI at /, capture proxy at /capture, one port. A Space is public: set WORKBENCH_ADMIN_KEY as a
# Space secret to open the capture control plane; without it the control plane stays closed and
# the UI still runs rollouts in-process.
FROM python:3.12-slim

# bubblewrap: the local sandbox; tmux: terminus-2 drives the shell through it.
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap tmux \
 && rm -rf /var/lib/apt/lists/*

# Spaces run the container as uid 1000.
RUN useradd --create-home --uid 1000 user
USER user
ENV HOME=/home/user \
    PATH=/home/user/.local/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    GRADIO_ANALYTICS_ENABLED=False \
    LITELLM_LOCAL_MODEL_COST_MAP=True \
    WORKBENCH_HOME=/home/user/.workbench
WORKDIR /home/user/app

COPY --chown=user requirements.txt .
RUN pip install --no-cache-dir --user -r requirements.txt

# Sandbox providers' SDKs are Harbor extras. On a Space, set the variable HARBOR_EXTRAS
# (Space variables arrive as build args), e.g. "daytona,modal", and their keys as secrets.
ARG HARBOR_EXTRAS=""
RUN if [ -n "$HARBOR_EXTRAS" ]; then \
      version=$(sed -n 's/^harbor==//p' requirements.txt); \
      pip install --no-cache-dir --user "harbor[$HARBOR_EXTRAS]==$version"; \
    fi

COPY --chown=user . .
RUN pip install --no-cache-dir --user --no-deps -e .

EXPOSE 7860
CMD ["python", "app.py", "--host", "0.0.0.0"]

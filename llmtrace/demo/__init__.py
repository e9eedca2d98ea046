"""``llmtrace demo``: a real RAG service on a real local model, traced, benchmarked, improved."""

import os

# The embedding model runs small matrix products with numpy. Several BLAS threads on small
# products spin against each other and against the model server on a 2-core machine: one thread
# was 20 times faster here. Only takes effect when numpy is not imported yet.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

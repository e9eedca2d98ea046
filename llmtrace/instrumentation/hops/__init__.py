"""Where a request leaves the process or changes threads: HTTP clients (``hop``, the shared HTTP
hop, with httpx, httpx2 and requests) and the threads a request's work runs on."""

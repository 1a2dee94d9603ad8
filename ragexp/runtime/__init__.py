"""Process-level services every stage uses: the content-addressed stage cache, hashing, file locks,
progress bars, signal handling and CPU thread counts."""

"""ragexp: a declarative experiment runner for RAG pipelines.

Retrieval is scored apart from generation, gold evidence is stored as character spans so it
survives re-chunking, and every run is logged to MLflow.
"""

__version__ = "0.1.0"

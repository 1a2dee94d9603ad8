"""Small local web pages ragexp serves on 127.0.0.1: a FastAPI app with shared static files
(:mod:`ragexp.web.app`) and files saved whole with an etag check (:mod:`ragexp.web.files`)."""
